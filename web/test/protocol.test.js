// Unit tests of the protocol client: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { parseFrame, FrameError } from '../static/js/frames.js';
import { SSEParser } from '../static/js/sse.js';
import { CursorStore, EffectLog, MemoryStorage } from '../static/js/storage.js';
import { backoffDelay, ConversationStream } from '../static/js/stream.js';
import { OperatorClient } from '../static/js/operator-api.js';
import { Api, ApiError } from '../static/js/api.js';

const CONV = '11111111-1111-4111-8111-111111111111';
const REQ = '22222222-2222-4222-8222-222222222222';

function frame(seq, type = 'text', payload = { content: 'x' + seq, format: 'markdown' }, extra = {}) {
  return { version: 1, conversationId: CONV, requestId: REQ, sequence: seq, type, payload, createdAt: 1700000000 + seq, ...extra };
}

function sse(f) {
  return `id: ${f.sequence}\ndata: ${JSON.stringify(f)}\n\n`;
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

test('backoff doubles, is capped, and has bounded jitter', () => {
  const lo = { baseMs: 100, capMs: 1000, random: () => 0 };
  const hi = { baseMs: 100, capMs: 1000, random: () => 1 };
  assert.deepEqual([0, 1, 2, 3, 4, 5, 50].map((a) => backoffDelay(a, hi)), [100, 200, 400, 800, 1000, 1000, 1000]);
  assert.deepEqual([0, 1, 2, 3, 4].map((a) => backoffDelay(a, lo)), [50, 100, 200, 400, 500]);
});

// --- the stream, against a fake fetch --------------------------------------

/** A fake daemon: each connection gets the next scripted response. */
function fakeFetch(responses) {
  const calls = [];
  const fn = async (url, init) => {
    calls.push({ url, init });
    const next = responses.shift();
    if (!next) return new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))));
    if (next.status && next.status !== 200) {
      return new Response(JSON.stringify({ error: next.error }), { status: next.status, headers: { 'Content-Type': 'application/json' } });
    }
    const enc = new TextEncoder();
    const body = new ReadableStream({
      async start(ctrl) {
        for (const chunk of next.chunks) ctrl.enqueue(enc.encode(chunk));
        if (next.hold) {
          init.signal.addEventListener('abort', () => ctrl.error(new DOMException('aborted', 'AbortError')));
        } else {
          ctrl.close();
        }
      },
    });
    return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
  };
  return { fn, calls };
}

function manualTimers() {
  const pending = [];
  return {
    setTimeout: (fn, ms) => { const t = { fn, ms }; pending.push(t); return t; },
    clearTimeout: (t) => { const i = pending.indexOf(t); if (i >= 0) pending.splice(i, 1); },
    pending,
    fire() { const t = pending.shift(); t.fn(); return t.ms; },
  };
}

const until = async (cond) => {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(cond(), 'condition not reached');
};

function newStream({ responses, storage = new MemoryStorage(), timers = manualTimers(), token = 'tok' }) {
  const ff = fakeFetch(responses);
  const api = new Api({ getToken: () => token, fetch: ff.fn, baseUrl: 'http://daemon' });
  const frames = [];
  const states = [];
  const notices = [];
  const errors = [];
  const cursors = new CursorStore(storage);
  const s = new ConversationStream({ api, conversationId: CONV, cursors, idleTimeoutMs: 0, setTimeout: timers.setTimeout, clearTimeout: timers.clearTimeout, random: () => 1 }, {
    onFrame: (f) => { frames.push(f); },
    onState: (st, info) => states.push([st, info && info.delayMs]),
    onNotice: (n) => notices.push(n),
    onError: (e) => errors.push(e),
  });
  return { s, ff, frames, states, notices, errors, cursors, timers, storage };
}

test('stream: bearer header, frames in order, cursor stored, reconnect from the cursor, duplicates dropped', async () => {
  const f1 = frame(1), f2 = frame(2), f3 = frame(3);
  const t = newStream({
    responses: [
      { chunks: [': connected\n\n', sse(f1), sse(f2).slice(0, 20), sse(f2).slice(20)] }, // ends: connection lost
      { chunks: [': connected\n\n', sse(f2), ': heartbeat\n\n', sse(f3)], hold: true }, // server redelivers 2
    ],
  });
  t.s.start();
  await until(() => t.frames.length === 2 && t.timers.pending.length === 1);
  assert.equal(t.ff.calls[0].init.headers.Authorization, 'Bearer tok');
  assert.ok(!t.ff.calls[0].url.includes('tok'), 'the token is never in the URL');
  assert.match(t.ff.calls[0].url, /\/stream\?after_sequence=0$/);
  assert.equal(t.cursors.get(CONV), 2);
  assert.equal(t.timers.fire(), 500, 'first retry waits the base delay');
  await until(() => t.frames.length === 3);
  assert.match(t.ff.calls[1].url, /after_sequence=2$/);
  assert.deepEqual(t.frames.map((f) => f.sequence), [1, 2, 3]);
  assert.equal(t.cursors.get(CONV), 3);
  assert.ok(t.states.some(([s]) => s === 'reconnecting'));
  assert.equal(t.states.at(-1)[0], 'open');
  t.s.stop();
});

test('stream: a reload resumes after the stored cursor', async () => {
  const storage = new MemoryStorage();
  new CursorStore(storage).advance(CONV, 7);
  const t = newStream({ storage, responses: [{ chunks: [': connected\n\n', sse(frame(7)), sse(frame(8))], hold: true }] });
  t.s.start();
  await until(() => t.frames.length === 1);
  assert.match(t.ff.calls[0].url, /after_sequence=7$/);
  assert.equal(t.frames[0].sequence, 8);
  t.s.stop();
});

test('stream: backoff grows while the daemon is down and is capped', async () => {
  const down = { status: 503, error: { code: 'service_failure', message: 'down', retryable: true } };
  const t = newStream({ responses: [down, down, down, down, down, down, down, down, down, down] });
  t.s.o.maxDelayMs = 4000;
  t.s.start();
  const delays = [];
  for (let i = 0; i < 7; i++) {
    await until(() => t.timers.pending.length === 1);
    delays.push(t.timers.fire());
  }
  assert.deepEqual(delays, [500, 1000, 2000, 4000, 4000, 4000, 4000]);
  t.s.stop();
});

test('stream: replay_gap reloads from the earliest cursor with a notice', async () => {
  const storage = new MemoryStorage();
  new CursorStore(storage).advance(CONV, 3);
  const t = newStream({
    storage,
    responses: [
      { status: 409, error: { code: 'replay_gap', message: 'purged', retryable: false, details: { earliestAfterSequence: 40 } } },
      { chunks: [': connected\n\n', sse(frame(41))], hold: true },
    ],
  });
  t.s.start();
  await until(() => t.frames.length === 1);
  assert.deepEqual(t.notices, [{ kind: 'replay_gap', from: 3, to: 40 }]);
  assert.match(t.ff.calls[1].url, /after_sequence=40$/);
  assert.equal(t.cursors.get(CONV), 41);
  t.s.stop();
});

test('stream: an unknown frame type stops the stream with a visible error and nothing after it is applied', async () => {
  const bad = { ...frame(2), type: 'teleport' };
  const t = newStream({ responses: [{ chunks: [': connected\n\n', sse(frame(1)), sse(bad), sse(frame(3))], hold: true }] });
  t.s.start();
  await until(() => t.errors.length === 1);
  assert.deepEqual(t.frames.map((f) => f.sequence), [1]);
  assert.ok(t.errors[0] instanceof FrameError);
  assert.equal(t.s.state, 'failed');
  assert.equal(t.cursors.get(CONV), 1, 'the cursor does not pass the refused frame');
  assert.equal(t.timers.pending.length, 0, 'no automatic reconnect past a protocol error');
});

test('stream: an unknown version is a protocol_version error', async () => {
  const t = newStream({ responses: [{ chunks: [sse({ ...frame(1), version: 2 })], hold: true }] });
  t.s.start();
  await until(() => t.errors.length === 1);
  assert.equal(t.errors[0].code, 'protocol_version');
  assert.equal(t.frames.length, 0);
});

test('stream: 401 stops without retrying', async () => {
  const t = newStream({ responses: [{ status: 401, error: { code: 'auth_required', message: 'no', retryable: false } }] });
  t.s.start();
  await until(() => t.errors.length === 1);
  assert.ok(t.errors[0] instanceof ApiError);
  assert.equal(t.errors[0].code, 'auth_required');
  assert.equal(t.timers.pending.length, 0);
});

test('stream: an async frame handler sees frames one at a time, in order', async () => {
  const t = newStream({ responses: [{ chunks: [sse(frame(1)) + sse(frame(2)) + sse(frame(3))], hold: true }] });
  const order = [];
  t.s.h.onFrame = async (f) => {
    order.push('start' + f.sequence);
    await new Promise((r) => setImmediate(r));
    order.push('end' + f.sequence);
  };
  t.s.start();
  await until(() => order.length === 6);
  assert.deepEqual(order, ['start1', 'end1', 'start2', 'end2', 'start3', 'end3']);
  t.s.stop();
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
