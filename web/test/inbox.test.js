// Unit tests of the approvals inbox's list and the Designer's step errors: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { sortInbox } from '../static/js/inbox.js';
import { errorStep, stepErrorText } from '../static/js/spaces/designer.js';
import { groupChatter } from '../static/js/spaces/history.js';

const NOW = 1_800_000_000;
/** @param {Partial<import('../types/wire').ProposalState>} p @returns {any} */
const prop = (p) => ({ status: 'pending', risk: 'execute', expiresAt: NOW + 600, createdAt: NOW - 60, submittedBy: 'alice', conversationId: 'c1', ...p });

test('inbox: what I may decide, oldest first; the expired and the others apart', () => {
  const bea = { id: 'b', name: 'bea', role: 'approver', secondApproverFor: ['destructive'] };
  const list = [
    prop({ id: 'new', createdAt: NOW - 10 }),
    prop({ id: 'old', createdAt: NOW - 500 }),
    prop({ id: 'gone', createdAt: NOW - 900, expiresAt: NOW - 1 }),
    prop({ id: 'done', status: 'succeeded' }),
    prop({ id: 'mine-4eyes', risk: 'admin', impact: 'destructive', submittedBy: 'bea', createdAt: NOW - 30 }),
  ];
  const { mine, others } = sortInbox(list, bea, NOW);
  assert.deepEqual(mine.map((p) => p.id), ['old', 'new']);
  assert.deepEqual(others.map((p) => p.id), ['mine-4eyes']);
  const vic = { id: 'v', name: 'vic', role: 'viewer' };
  const v = sortInbox(list, vic, NOW);
  assert.equal(v.mine.length, 0);
  assert.equal(v.others.length, 3);
  // An admin proposal needs an approver: an operator may not decide it.
  const op = sortInbox([prop({ id: 'adm', risk: 'admin' })], { id: 'o', name: 'otto', role: 'operator' }, NOW);
  assert.deepEqual([op.mine.length, op.others.length], [0, 1]);
});

test('Designer: a step error counts steps from 1, never the API\'s steps[1]', () => {
  const e = { code: 'validation', message: 'step 2: playbook audit-repo needs argument "repo"', details: { field: 'steps[1].args', step: 2 } };
  assert.equal(errorStep(e), 1);
  const text = stepErrorText(e);
  assert.match(text, /^Step 2: playbook audit-repo needs argument "repo"\./);
  assert.ok(!text.includes('steps['), text);
  // An older server: the field alone.
  const old = { code: 'validation', message: 'playbook audit-repo needs argument "repo"', details: { field: 'steps[0].args' } };
  assert.equal(errorStep(old), 0);
  assert.match(stepErrorText(old), /^Step 1: playbook audit-repo/);
  assert.equal(errorStep({ code: 'conflict', message: 'x', details: {} }), null);
});

test('audit: a person\'s turns in one conversation are one row, others stay apart', () => {
  /** @param {number} id @param {string} actor @param {string} conv @param {string} [action] @returns {any} */
  const row = (id, actor, conv, action = 'studio.operator.turn_submitted') => ({ e: { id, actor, action, createdAt: id, targetId: null, details: { conversationId: conv } }, target: null, decision: '—' });
  const groups = groupChatter([row(9, 'owner', 'a'), row(8, 'owner', 'a'), row(7, 'owner', 'a'), row(6, 'alice', 'a'), row(5, 'owner', 'b'), row(4, 'owner', 'b', 'studio.app.command'), row(3, 'owner', 'b')]);
  assert.deepEqual(groups.map((g) => [g.e.id, g.count, g.oldest.id]), [[9, 3, 7], [6, 1, 6], [5, 1, 5], [4, 1, 4], [3, 1, 3]]);
});
