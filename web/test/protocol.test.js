// Unit tests of the protocol client: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { parseFrame, FrameError } from '../static/js/frames.js';
import { SSEParser } from '../static/js/sse.js';
import { CursorStore, EffectLog, MemoryStorage } from '../static/js/storage.js';
import { OperatorClient } from '../static/js/operator-api.js';
import { Api, ApiError, SentForApproval, errorText } from '../static/js/api.js';

const CONV = '11111111-1111-4111-8111-111111111111';
const REQ = '22222222-2222-4222-8222-222222222222';

function frame(seq, type = 'text', payload = { content: 'x' + seq, format: 'markdown' }, extra = {}) {
  return { version: 1, conversationId: CONV, requestId: REQ, sequence: seq, type, payload, createdAt: 1700000000 + seq, ...extra };
}

function collect() {
  const events = [];
  const comments = [];
  const p = new SSEParser({ onEvent: (e) => events.push(e), onComment: (c) => comments.push(c) });
  return { p, events, comments };
}

test('SSE: an event split at every possible chunk boundary parses the same', () => {
  const text = 'retry: 2000\n: connected\n\nid: 1\ndata: {"a":1}\n\n: heartbeat\n\nid: 2\ndata: {"b":"é"}\n\n';
  for (let cut = 0; cut <= text.length; cut++) {
    const { p, events, comments } = collect();
    p.push(text.slice(0, cut));
    p.push(text.slice(cut));
    assert.deepEqual(events.map((e) => e.data), ['{"a":1}', '{"b":"é"}'], `cut at ${cut}`);
    assert.deepEqual(events.map((e) => e.id), ['1', '2']);
    assert.deepEqual(comments, ['connected', 'heartbeat']);
  }
});

test('SSE: CRLF and lone CR line ends, also with CR and LF in different chunks', () => {
  const { p, events } = collect();
  p.push('id: 5\r');
  p.push('\ndata: one\r\n\r');
  p.push('\n');
  p.push('data: two\rdata: three\r\r');
  assert.deepEqual(events.map((e) => e.data), ['one', 'two\nthree']);
  assert.equal(events[0].id, '5');
});

test('SSE: multi-line data, comments and heartbeats, no space after the colon, unknown fields', () => {
  const { p, events, comments } = collect();
  p.push(': heartbeat\n\ndata:line1\ndata: line2\nevent: x\nfoo: bar\n\n');
  assert.deepEqual(comments, ['heartbeat']);
  assert.equal(events.length, 1);
  assert.equal(events[0].data, 'line1\nline2');
  assert.equal(events[0].event, 'x');
});

test('SSE: an event without its closing blank line is not dispatched', () => {
  const { p, events } = collect();
  p.push('data: partial');
  p.end();
  assert.equal(events.length, 0);
});

test('SSE: multibyte characters split across network chunks decode intact', () => {
  const bytes = new TextEncoder().encode('data: 😀 ok\n\n');
  const dec = new TextDecoder();
  const { p, events } = collect();
  for (const b of bytes) p.push(dec.decode(new Uint8Array([b]), { stream: true }));
  p.push(dec.decode());
  assert.equal(events[0].data, '😀 ok');
});

test('frames: version 1 of each type validates', () => {
  const ok = [
    frame(1),
    frame(2, 'tool_call', { callId: 'c', tool: 'list_runs', arguments: {}, mode: 'read' }),
    frame(3, 'tool_result', { callId: 'c', ok: true, result: [] }),
    frame(4, 'tool_result', { callId: 'c', ok: false, error: { code: 'validation', message: 'm', retryable: false } }),
    frame(5, 'ui_command', { effectId: 'e', effect: { kind: 'navigate', space: 'mission', params: {} }, expiresAt: 1 }),
    frame(6, 'proposal', { proposal: { id: 'p', commandType: 'launch_run', command: {}, commandHash: 'h', risk: 'execute', summary: 's', target: null, idempotencyKey: 'k', expiresAt: 2 } }),
    frame(7, 'confirmation', { proposalId: 'p', state: 'required' }),
    frame(8, 'error', { error: { code: 'model_failure', message: 'm', retryable: true } }),
    frame(9, 'done', { outcome: 'completed', lastSequence: 9 }),
  ];
  for (const f of ok) assert.equal(parseFrame(JSON.stringify(f)).sequence, f.sequence);
});

test('frames: an unknown version or type is a protocol error, never applied', () => {
  assert.throws(() => parseFrame(JSON.stringify(frame(1, 'text', { content: 'x', format: 'plain' }, { version: 2 }))),
    (e) => e instanceof FrameError && e.code === 'protocol_version');
  assert.throws(() => parseFrame(JSON.stringify(frame(1, 'hologram', {}))), (e) => e instanceof FrameError && e.code === 'protocol');
  assert.throws(() => parseFrame('not json'), FrameError);
  assert.throws(() => parseFrame(JSON.stringify(frame(0))), FrameError);
  assert.throws(() => parseFrame(JSON.stringify(frame(1, 'ui_command', { effect: { kind: 'navigate' } }))), FrameError);
  assert.throws(() => parseFrame(JSON.stringify(frame(1, 'proposal', { proposal: { id: 'p', risk: 'yolo' } }))), FrameError);
});

test('cursors persist per conversation and only move forward', () => {
  const storage = new MemoryStorage();
  const c = new CursorStore(storage);
  assert.equal(c.get(CONV), 0);
  c.advance(CONV, 5);
  c.advance(CONV, 3);
  assert.equal(new CursorStore(storage).get(CONV), 5, 'a new store over the same storage (a reload) sees the cursor');
  assert.equal(c.get('other'), 0);
  c.reset(CONV, 2);
  assert.equal(c.get(CONV), 2);
});

test('effect log survives a reload and records the acknowledgement', () => {
  const storage = new MemoryStorage();
  const log = new EffectLog(storage);
  log.put('e1', { status: 'applied', clientRoute: '/?view=fleet', acked: false, at: 1, conversationId: CONV });
  const again = new EffectLog(storage);
  assert.equal(again.get('e1').status, 'applied');
  assert.equal(again.get('e1').acked, false);
  again.markAcked('e1');
  assert.equal(new EffectLog(storage).get('e1').acked, true);
  const small = new EffectLog(new MemoryStorage(), 'k', 3);
  for (let i = 0; i < 5; i++) small.put('e' + i, { status: 'applied', acked: true, at: i, conversationId: CONV });
  assert.deepEqual(Object.keys(small.all()).sort(), ['e2', 'e3', 'e4']);
});

test('client: a turn is submitted once; a conflict is returned, never retried', async () => {
  const calls = [];
  const api = new Api({
    getToken: () => 't',
    fetch: async (url, init) => {
      calls.push({ url, body: JSON.parse(init.body) });
      return new Response(JSON.stringify({ error: { code: 'stale_context', message: 'moved on', retryable: false, details: { actualLastSequence: 9 } } }), { status: 409 });
    },
  });
  const c = new OperatorClient(api);
  await assert.rejects(c.submitTurn(CONV, 'hi', { space: 'mission', route: '/' }, 4), (e) => e instanceof ApiError && e.code === 'stale_context' && e.details.actualLastSequence === 9);
  assert.equal(calls.length, 1);
  assert.deepEqual(calls[0].body, { instruction: 'hi', context: { space: 'mission', route: '/' }, expectedLastSequence: 4 });
});

test('client: confirm sends the stored hash and target version, or no version when there is no target', async () => {
  const bodies = [];
  const api = new Api({ getToken: () => 't', fetch: async (url, init) => { bodies.push([url, JSON.parse(init.body)]); return new Response('{"proposalId":"p","status":"succeeded"}'); } });
  const c = new OperatorClient(api);
  await c.confirmProposal(CONV, { id: 'p', commandHash: 'abc', target: { kind: 'run', id: 'r', version: '3' } });
  await c.confirmProposal(CONV, { id: 'q', commandHash: 'def', target: null });
  assert.match(bodies[0][0], /\/proposals\/p\/confirm$/);
  assert.deepEqual(bodies[0][1], { expectedCommandHash: 'abc', expectedTargetVersion: '3' });
  assert.deepEqual(bodies[1][1], { expectedCommandHash: 'def' });
});

test('Api: a direct command sent for approval (202 with its proposal as Location) is SentForApproval, shown by its message', async () => {
  const proposal = { id: 'p1', status: 'pending', message: 'Sent for approval: waiting for another approver' };
  const api = new Api({
    getToken: () => 't',
    fetch: async () => new Response(JSON.stringify(proposal), { status: 202, headers: { 'Content-Type': 'application/json', Location: '/api/operator/proposals/p1' } }),
  });
  await assert.rejects(api.del('/api/app/schedules/nightly'), (e) => {
    assert.ok(e instanceof SentForApproval);
    assert.equal(e.proposal.id, 'p1');
    assert.equal(errorText(e), 'Sent for approval: waiting for another approver');
    return true;
  });
  // A launch's 202 (a queued run) is its answer, not an approval request.
  const run = new Api({ getToken: () => 't', fetch: async () => new Response(JSON.stringify({ id: 'r1' }), { status: 202 }) });
  assert.deepEqual(await run.post('/api/app/runs', {}), { id: 'r1' });
});
