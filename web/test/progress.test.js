// Unit tests of the turn progress line's words: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { progressText } from '../static/js/dock/progress.js';

const NOW = 1_800_000_000;

test('progress: each state in words, a retry counting down', () => {
  assert.equal(progressText(null, NOW), '');
  assert.equal(progressText({ requestId: 'r', state: 'queued', queuePosition: 1, since: NOW }, NOW), 'Queued: next in line for the model');
  assert.equal(progressText({ requestId: 'r', state: 'queued', queuePosition: 3, since: NOW }, NOW), 'Queued: number 3 in line for the model');
  // How long it has waited, once it is a while.
  assert.equal(progressText({ requestId: 'r', state: 'queued', queuePosition: 3, since: NOW }, NOW + 4), 'Queued: number 3 in line for the model');
  assert.equal(progressText({ requestId: 'r', state: 'queued', queuePosition: 3, since: NOW }, NOW + 42), 'Queued: number 3 in line for the model (waiting 42 s)');
  assert.equal(progressText({ requestId: 'r', state: 'queued', since: NOW }, NOW + 600), 'Queued for the model (waiting 10 min)');
  assert.equal(progressText({ requestId: 'r', state: 'working', since: NOW }, NOW), 'Working…');
  const retry = { requestId: 'r', state: /** @type {const} */ ('retrying'), attempt: 2, errorCode: 'rate_limited', retryAt: NOW + 6, since: NOW };
  assert.equal(progressText(retry, NOW), 'The model is rate limited; retrying in 6 s (attempt 2)');
  assert.equal(progressText(retry, NOW + 5.5), 'The model is rate limited; retrying in 1 s (attempt 2)');
  assert.equal(progressText(retry, NOW + 9), 'The model is rate limited; retrying in 0 s (attempt 2)');
  assert.equal(progressText({ ...retry, errorCode: 'model_failure', attempt: 3 }, NOW), 'The model failed (model_failure); retrying in 6 s (attempt 3)');
  const outage = { requestId: 'r', state: /** @type {const} */ ('database_unavailable'), attempt: 4, errorCode: 'service_failure', retryAt: NOW + 2, since: NOW };
  assert.equal(progressText(outage, NOW), 'The database is unavailable; retrying in 2 s (attempt 4)');
  assert.equal(progressText({ requestId: 'r', state: 'awaiting_confirmation', since: NOW }, NOW), 'Waiting for a decision on the proposal');
  assert.equal(progressText({ requestId: 'r', state: 'executing', since: NOW }, NOW), 'Executing the confirmed command…');
  // A person's approval request: no model's proposal.
  assert.equal(progressText({ requestId: 'r', state: 'awaiting_confirmation', since: NOW }, NOW, true), 'Waiting for a decision on the approval request');
  assert.equal(progressText({ requestId: 'r', state: 'executing', since: NOW }, NOW, true), 'Executing the confirmed command…');
});

test('progress: the messages waiting behind the turn', () => {
  const w = (/** @type {string} */ preview, /** @type {number} */ position) => ({ requestId: 'w' + position, position, preview, since: NOW });
  assert.equal(progressText({ requestId: 'r', state: 'working', since: NOW, waiting: [w('and then this', 1)] }, NOW),
    'Working… — then 1 message waits: “and then this”');
  assert.equal(progressText({ requestId: 'r', state: 'awaiting_confirmation', since: NOW, waiting: [w('a', 1), w('b', 2)] }, NOW),
    'Waiting for a decision on the proposal — then 2 messages wait: “a” first');
  assert.equal(progressText({ requestId: 'r', state: 'working', since: NOW, waiting: [] }, NOW), 'Working…');
});
