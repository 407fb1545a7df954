// Unit tests of what the cockpit lets each role do, and of the words it
// shows instead of codes: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { roleAllows, confirmRole, may, mayConfirm, mayDeny, needsAnotherApprover, amendmentWaits, decisionReason, ROLES } from '../static/js/roles.js';
import { riskText, commandTitle, actorName, errorSentence } from '../static/js/words.js';

const me = (role, name = 'alice', secondApproverFor = []) => ({ id: 'id-' + name, name, role, secondApproverFor });

test('roles are ordered; each allows what the lesser ones do', () => {
  assert.deepEqual(ROLES, ['viewer', 'agent', 'operator', 'approver', 'admin']);
  assert.ok(roleAllows('admin', 'viewer') && roleAllows('operator', 'operator'));
  assert.ok(!roleAllows('viewer', 'agent') && !roleAllows('operator', 'approver'));
  assert.ok(!roleAllows('owner', 'viewer'), 'an unknown role allows nothing');
});

test('confirm needs operator for mutate and execute, approver for the rest (the daemon\'s ConfirmRole)', () => {
  assert.equal(confirmRole('mutate'), 'operator');
  assert.equal(confirmRole('execute'), 'operator');
  assert.equal(confirmRole('admin'), 'approver');
});

test('a viewer is told which role it lacks, for confirm and deny alike', () => {
  const v = mayConfirm(me('viewer'), { risk: 'mutate' });
  assert.equal(v.allowed, false);
  assert.match(v.reason, /needs the operator role; you are a viewer/);
  assert.match(mayDeny(me('viewer')).reason, /[Nn]eeds the operator role/);
  assert.equal(may(me('agent'), 'converse').allowed, true);
  assert.match(may(me('viewer'), 'converse').reason, /[Nn]eeds the agent role; you are a viewer/);
  assert.match(may(me('operator'), 'administer').reason, /[Nn]eeds the admin role; you are an operator/);
});

test('an operator may confirm a change or a run, not an administrative proposal', () => {
  assert.equal(mayConfirm(me('operator'), { risk: 'execute', impact: 'destructive' }).allowed, true);
  const admin = mayConfirm(me('operator'), { risk: 'admin' });
  assert.equal(admin.allowed, false);
  assert.match(admin.reason, /needs the approver role/);
  assert.equal(mayConfirm(me('approver'), { risk: 'admin' }).allowed, true);
});

test('four-eyes: the author waits for another approver (deny stays allowed); others may confirm', () => {
  const policy = ['destructive'];
  const p = { risk: 'execute', impact: 'destructive', submittedBy: 'alice' };
  const author = mayConfirm(me('admin', 'alice', policy), p);
  assert.equal(author.allowed, false);
  assert.equal(author.waiting, true);
  assert.match(author.reason, /^Waiting for another approver/);
  assert.equal(mayDeny(me('admin', 'alice', policy)).allowed, true);
  assert.equal(mayConfirm(me('approver', 'bea', policy), p).allowed, true);
  // Not in the policy, or no policy: the author confirms.
  assert.equal(mayConfirm(me('admin', 'alice', policy), { risk: 'mutate', submittedBy: 'alice' }).allowed, true);
  assert.equal(mayConfirm(me('admin', 'alice'), p).allowed, true);
  // A risk in the policy counts as well as an impact; unknown author: not held.
  assert.ok(needsAnotherApprover(me('operator', 'alice', ['execute']), { risk: 'execute', submittedBy: 'alice' }));
  assert.ok(!needsAnotherApprover(me('operator', 'alice', ['execute']), { risk: 'execute' }));
  // Levels are ordered: destructive covers irreversible, execute covers admin.
  assert.ok(needsAnotherApprover(me('operator', 'alice', ['destructive']), { risk: 'mutate', impact: 'irreversible', submittedBy: 'alice' }));
  assert.ok(!needsAnotherApprover(me('operator', 'alice', ['irreversible']), { risk: 'execute', impact: 'destructive', submittedBy: 'alice' }));
  assert.ok(needsAnotherApprover(me('admin', 'alice', ['execute']), { risk: 'admin', submittedBy: 'alice' }));
  // Risk admin: an approver never confirms its own; an admin may.
  assert.equal(mayConfirm(me('approver', 'alice'), { risk: 'admin', submittedBy: 'alice' }).waiting, true);
  assert.equal(mayConfirm(me('admin', 'alice'), { risk: 'admin', submittedBy: 'alice' }).allowed, true);
  // The role comes first: a viewer author is told the role, not four-eyes.
  assert.equal(mayConfirm(me('viewer', 'alice', policy), p).waiting, undefined);
});

test('words: risks, commands, actions and actors as a person reads them', () => {
  assert.equal(riskText('mutate'), 'Changes data');
  assert.ok(!/MUTATE|mutate/.test(riskText('mutate')));
  assert.equal(commandTitle('launch_playbook'), 'Launch playbook');
  assert.equal(commandTitle('studio.app.seeded'), 'Starter content created');
  assert.equal(commandTitle('studio.something.new_thing'), 'New thing');
  assert.equal(actorName('studio_scheduler'), 'the scheduler');
  assert.equal(actorName('bea'), 'bea', 'a principal is named as itself');
  assert.ok(!actorName('studio_cli').includes('cockpit'), 'the command line is not the cockpit');
  assert.equal(errorSentence({ code: 'not_found', message: 'run deadbeef-0000-4000-8000-000000000000 not found' }), 'No run deadbeef exists (it may have been deleted).');
  assert.equal(errorSentence({ code: 'validation', message: 'input is too long' }), 'Input is too long.');
});

test('a card says in one sentence why its controls are held', () => {
  assert.equal(decisionReason(me('operator'), { risk: 'mutate' }), '');
  assert.equal(decisionReason(me('viewer'), { risk: 'execute' }), 'Confirming or denying this needs the operator role; you are a viewer.');
  assert.equal(decisionReason(me('viewer'), { risk: 'admin' }), 'Confirming this needs the approver role and denying it needs the operator role; you are a viewer.');
  assert.equal(decisionReason(me('operator'), { risk: 'admin' }), 'Confirming this needs the approver role; you are an operator.');
  assert.match(decisionReason(me('admin', 'alice', ['destructive']), { risk: 'execute', impact: 'destructive', submittedBy: 'alice' }), /^Waiting for another approver/);
});

test('an amendment of another\'s proposal is the amender\'s: four-eyes asks someone else to confirm it', () => {
  const bea = me('approver', 'bea', ['destructive']);
  // alice's request of a destructive change: bea may confirm it, but her amendment of it waits.
  assert.equal(mayConfirm(bea, { risk: 'mutate', impact: 'irreversible', submittedBy: 'alice' }).allowed, true);
  assert.ok(amendmentWaits(bea, { risk: 'mutate', impact: 'irreversible', submittedBy: 'alice' }));
  // Below the levels, or without four-eyes, she confirms her amendment herself.
  assert.ok(!amendmentWaits(bea, { risk: 'execute', submittedBy: 'alice' }));
  assert.ok(!amendmentWaits(me('approver', 'bea'), { risk: 'mutate', impact: 'irreversible', submittedBy: 'alice' }));
  // Risk admin: an approver never confirms her own; an admin does.
  assert.ok(amendmentWaits(me('approver', 'bea'), { risk: 'admin', submittedBy: 'alice' }));
  assert.ok(!amendmentWaits(me('admin', 'owner'), { risk: 'admin', submittedBy: 'alice' }));
  assert.ok(!amendmentWaits(null, { risk: 'admin' }));
});
