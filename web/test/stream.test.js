// The conversation stream (stream.js) against a scripted daemon: the cursor,
// de-duplication, backoff, the replay gap, and the EventSource transport with
// stream tickets. node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { FrameError } from '../static/js/frames.js';
import { CursorStore, MemoryStorage } from '../static/js/storage.js';
import { backoffDelay, ConversationStream, followWithTicket } from '../static/js/stream.js';
import { Api, ApiError } from '../static/js/api.js';

const CONV = '11111111-1111-4111-8111-111111111111';
const REQ = '22222222-2222-4222-8222-222222222222';

function frame(seq, type = 'text', payload = { content: 'x' + seq, format: 'markdown' }, extra = {}) {
  return { version: 1, conversationId: CONV, requestId: REQ, sequence: seq, type, payload, createdAt: 1700000000 + seq, ...extra };
}

function sse(f) {
  return `id: ${f.sequence}\ndata: ${JSON.stringify(f)}\n\n`;
}

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
    /** Fires the pending timer of this duration (the idle timer beside a backoff wait). */
    fireMs(ms) { const i = pending.findIndex((t) => t.ms === ms); assert.ok(i >= 0, `no ${ms} ms timer pending`); const [t] = pending.splice(i, 1); t.fn(); },
  };
}

const until = async (cond) => {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(cond(), 'condition not reached');
};

function newStream({ responses, storage = new MemoryStorage(), timers = manualTimers(), token = 'tok', options = {} }) {
  const ff = fakeFetch(responses);
  const api = new Api({ getToken: () => token, fetch: ff.fn, baseUrl: 'http://daemon' });
  const frames = [];
  const states = [];
  const notices = [];
  const errors = [];
  const cursors = new CursorStore(storage);
  const statuses = [];
  const s = new ConversationStream({ api, conversationId: CONV, cursors, idleTimeoutMs: 0, setTimeout: timers.setTimeout, clearTimeout: timers.clearTimeout, random: () => 1, ...options }, {
    onFrame: (f) => { frames.push(f); },
    onState: (st, info) => states.push([st, info && info.delayMs]),
    onNotice: (n) => notices.push(n),
    onError: (e) => errors.push(e),
    onStatus: (a) => statuses.push(a),
  });
  return { s, ff, frames, states, notices, errors, statuses, cursors, timers, storage };
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

test('stream: a handler that fails on one frame still gets the frames after it, on the same connection', async () => {
  const t = newStream({ responses: [{ chunks: [': connected\n\n', sse(frame(1)), sse(frame(2)), sse(frame(3))], hold: true }] });
  const onFrame = t.s.h.onFrame;
  t.s.h.onFrame = (f) => { if (f.sequence === 2) throw new Error('a rendering bug'); onFrame(f); };
  const logged = console.error;
  console.error = () => {};
  try {
    t.s.start();
    await until(() => t.frames.length === 2);
  } finally {
    console.error = logged;
  }
  assert.deepEqual(t.frames.map((f) => f.sequence), [1, 3]);
  assert.equal(t.cursors.get(CONV), 3);
  assert.equal(t.ff.calls.length, 1, 'no reconnect');
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

// --- the cursor ---------------------------------------------------------------

test('stream: the stored cursor moves only once the handler is done with a frame', async () => {
  const t = newStream({ responses: [{ chunks: [': connected\n\n', sse(frame(1))], hold: true }] });
  let release;
  const handled = new Promise((r) => { release = r; });
  t.s.h.onFrame = async (f) => { t.frames.push(f); await handled; };
  t.s.start();
  await until(() => t.frames.length === 1);
  assert.equal(t.cursors.get(CONV), 0, 'a reload while the frame is being applied gets it again');
  release();
  await until(() => t.cursors.get(CONV) === 1);
  t.s.stop();
});

test('stream: `after` starts after the given sequence, not the stored cursor', async () => {
  const storage = new MemoryStorage();
  new CursorStore(storage).advance(CONV, 7);
  const t = newStream({ storage, options: { after: 2 }, responses: [{ chunks: [': connected\n\n', sse(frame(3))], hold: true }] });
  t.s.start();
  await until(() => t.frames.length === 1);
  assert.match(t.ff.calls[0].url, /after_sequence=2$/);
  assert.equal(t.frames[0].sequence, 3);
  t.s.stop();
});

// --- de-duplication -----------------------------------------------------------

test('stream: a frame at or below the cursor is dropped within a connection too', async () => {
  const t = newStream({ responses: [{ chunks: [': connected\n\n', sse(frame(1)), sse(frame(2)), sse(frame(1)), sse(frame(2)), sse(frame(3))], hold: true }] });
  t.s.start();
  await until(() => t.frames.length === 3 && t.cursors.get(CONV) === 3);
  assert.deepEqual(t.frames.map((f) => f.sequence), [1, 2, 3]);
  t.s.stop();
});

test('stream: a frame of another conversation stops the stream as a protocol error', async () => {
  const other = { ...frame(2), conversationId: '33333333-3333-4333-8333-333333333333' };
  const t = newStream({ responses: [{ chunks: [': connected\n\n', sse(frame(1)), sse(other), sse(frame(3))], hold: true }] });
  t.s.start();
  await until(() => t.errors.length === 1);
  assert.ok(t.errors[0] instanceof FrameError);
  assert.equal(t.errors[0].code, 'protocol');
  assert.deepEqual(t.frames.map((f) => f.sequence), [1]);
  assert.equal(t.s.state, 'failed');
  assert.equal(t.timers.pending.length, 0);
});

// --- backoff ----------------------------------------------------------------

test('stream: a connection that opened starts the backoff over', async () => {
  const down = { status: 503, error: { code: 'service_failure', message: 'down', retryable: true } };
  const t = newStream({ responses: [down, down, { chunks: [': connected\n\n', sse(frame(1))] }] });
  t.s.start();
  const delays = [];
  for (let i = 0; i < 3; i++) {
    await until(() => t.timers.pending.length === 1);
    delays.push(t.timers.fire());
  }
  assert.deepEqual(delays, [500, 1000, 500], 'after ": connected" the next drop waits the base delay again');
  assert.deepEqual(t.frames.map((f) => f.sequence), [1]);
  t.s.stop();
});

test('stream: 400, 403 and 404 stop; 500 and 502 are retried', async () => {
  for (const status of [400, 403, 404]) {
    const t = newStream({ responses: [{ status, error: { code: 'refused', message: String(status) } }] });
    t.s.start();
    await until(() => t.errors.length === 1);
    assert.equal(t.errors[0].status, status);
    assert.equal(t.s.state, 'failed', `HTTP ${status}`);
    assert.equal(t.timers.pending.length, 0, `HTTP ${status} is not retried`);
  }
  for (const status of [500, 502]) {
    const t = newStream({ responses: [{ status, error: { code: 'service_failure', message: String(status) } }] });
    t.s.start();
    await until(() => t.timers.pending.length === 1);
    assert.equal(t.errors.length, 0, `HTTP ${status} is no stop`);
    assert.equal(t.s.state, 'reconnecting');
    t.s.stop();
  }
});

test('stream: stop during a backoff wait cancels the reconnect', async () => {
  const t = newStream({ responses: [{ status: 503, error: { code: 'service_failure', message: 'down' } }] });
  t.s.start();
  await until(() => t.timers.pending.length === 1);
  t.s.stop();
  assert.equal(t.timers.pending.length, 0);
  assert.equal(t.s.state, 'closed');
  await t.s.connect(); // what a timer that escaped the stop would run
  assert.equal(t.ff.calls.length, 1, 'no connection after the stop');
});

test('stream: reconnectNow skips the backoff wait', async () => {
  const t = newStream({ responses: [{ status: 503, error: { code: 'service_failure', message: 'down' } }, { chunks: [': connected\n\n', sse(frame(1))], hold: true }] });
  t.s.start();
  await until(() => t.timers.pending.length === 1);
  t.s.reconnectNow();
  assert.equal(t.timers.pending.length, 0, 'the wait is cancelled');
  await until(() => t.frames.length === 1);
  assert.equal(t.ff.calls.length, 2);
  t.s.stop();
});

test('stream: a connection silent past the idle timeout is dropped and resumed from the cursor', async () => {
  const t = newStream({
    options: { idleTimeoutMs: 45000 },
    responses: [{ chunks: [': connected\n\n', sse(frame(1))], hold: true }, { chunks: [': connected\n\n', sse(frame(2))], hold: true }],
  });
  t.s.start();
  await until(() => t.frames.length === 1 && t.cursors.get(CONV) === 1);
  assert.equal(t.s.state, 'open');
  t.timers.fireMs(45000);
  await until(() => t.timers.pending.some((x) => x.ms === 500));
  t.timers.fireMs(500);
  await until(() => t.frames.length === 2);
  assert.match(t.ff.calls[1].url, /after_sequence=1$/);
  t.s.stop();
});

// --- the replay gap -----------------------------------------------------------

test('stream: a replay_gap stores the earliest cursor before any frame arrives', async () => {
  const storage = new MemoryStorage();
  new CursorStore(storage).advance(CONV, 3);
  const t = newStream({
    storage,
    responses: [{ status: 409, error: { code: 'replay_gap', message: 'purged', details: { earliestAfterSequence: 40 } } }, { chunks: [': connected\n\n'], hold: true }],
  });
  t.s.start();
  await until(() => t.s.state === 'open');
  assert.equal(new CursorStore(storage).get(CONV), 40, 'a reload after the gap starts at the earliest kept frame');
  assert.equal(t.timers.pending.length, 0, 'no backoff wait before reloading');
  t.s.stop();
});

test('stream: a replay_gap without an earliest sequence is retried with the cursor kept', async () => {
  const storage = new MemoryStorage();
  new CursorStore(storage).advance(CONV, 3);
  const t = newStream({ storage, responses: [{ status: 409, error: { code: 'replay_gap', message: 'purged', details: { earliestAfterSequence: 'forty' } } }] });
  t.s.start();
  await until(() => t.timers.pending.length === 1);
  assert.deepEqual(t.notices, []);
  assert.equal(t.s.cursor, 3);
  assert.equal(t.cursors.get(CONV), 3);
  t.s.stop();
});

// --- progress comments --------------------------------------------------------

test('stream: status comments report the active turn and move no cursor', async () => {
  const t = newStream({
    responses: [{ chunks: [': connected\n\n', ': status {"activeTurn":{"requestId":"r1","phase":"model"}}\n\n', ': status not json\n\n', ': status {"other":1}\n\n', ': status {"activeTurn":null}\n\n'], hold: true }],
  });
  t.s.start();
  await until(() => t.statuses.length === 2);
  assert.deepEqual(t.statuses, [{ requestId: 'r1', phase: 'model' }, null]);
  assert.equal(t.s.cursor, 0);
  assert.equal(t.frames.length, 0);
  t.s.stop();
});

// --- EventSource with stream tickets ------------------------------------------

/** A browser EventSource stand-in: the test plays the server's part. */
class FakeEventSource {
  static all = [];
  constructor(url) {
    this.url = url;
    this.closed = false;
    FakeEventSource.all.push(this);
  }
  close() { this.closed = true; }
  /** What the server sends; a closed source hears nothing more. */
  send(f) { if (!this.closed) this.onmessage({ data: JSON.stringify(f) }); }
}

const eventually = async (cond, what) => {
  const end = Date.now() + 5000;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 1));
  assert.ok(cond(), what);
};

function ticketStream({ createTicket }) {
  FakeEventSource.all = [];
  const asked = [];
  const client = {
    api: { baseUrl: 'http://daemon' },
    createTicket: async (conv, after) => { asked.push([conv, after]); return createTicket(asked.length); },
  };
  const frames = [];
  const states = [];
  const errors = [];
  const handle = followWithTicket({ client, conversationId: CONV, EventSource: FakeEventSource, baseDelayMs: 1, maxDelayMs: 2 }, {
    onFrame: (f) => frames.push(f.sequence),
    onState: (s) => states.push(s),
    onError: (e) => errors.push(e),
  });
  return { handle, asked, frames, states, errors, sources: FakeEventSource.all };
}

test('ticket stream: each connection redeems a fresh ticket from the cursor; redeliveries are dropped', async () => {
  const t = ticketStream({ createTicket: (n) => ({ ticket: 'tk' + n }) });
  await eventually(() => t.sources.length === 1, 'the first EventSource');
  const first = t.sources[0];
  assert.equal(first.url, `http://daemon/api/operator/conversations/${CONV}/stream?after_sequence=0&ticket=tk1`);
  first.onopen();
  first.send(frame(1));
  first.send(frame(2));
  first.onerror(); // the daemon went away: its ticket is spent
  assert.ok(first.closed, 'EventSource does not reconnect with a spent ticket');
  await eventually(() => t.sources.length === 2, 'a second EventSource');
  const second = t.sources[1];
  assert.deepEqual(t.asked, [[CONV, 0], [CONV, 2]]);
  assert.match(second.url, /after_sequence=2&ticket=tk2$/);
  second.onopen();
  second.send(frame(2));
  second.send(frame(3));
  assert.deepEqual(t.frames, [1, 2, 3]);
  assert.equal(t.handle.cursor(), 3);
  assert.deepEqual(t.states, ['connecting', 'open', 'reconnecting', 'reconnecting', 'open']);
  t.handle.stop();
  assert.ok(second.closed);
});

test('ticket stream: a refused ticket stops; a daemon out of reach is asked again', async () => {
  const refused = ticketStream({ createTicket: () => { throw new ApiError(403, { code: 'forbidden', message: 'no' }); } });
  try {
    await eventually(() => refused.errors.length === 1, 'the refusal');
  } finally {
    refused.handle.stop(); // a broken stop on refusal would ask for ever
  }
  assert.equal(refused.errors[0].code, 'forbidden');
  assert.deepEqual(refused.states, ['connecting', 'failed', 'closed'], 'failed, then closed by the stop');
  assert.equal(refused.asked.length, 1, 'a refused ticket is not asked for again');
  assert.equal(refused.sources.length, 0);

  const flaky = ticketStream({
    createTicket: (n) => {
      if (n < 3) throw new ApiError(0, { code: 'network', message: 'unreachable' });
      return { ticket: 'tk' + n };
    },
  });
  try {
    await eventually(() => flaky.sources.length === 1, 'an EventSource once the daemon answers');
  } finally {
    flaky.handle.stop();
  }
  assert.equal(flaky.asked.length, 3);
  assert.deepEqual(flaky.errors, []);
});

test('ticket stream: a malformed frame stops and closes the source', async () => {
  const t = ticketStream({ createTicket: (n) => ({ ticket: 'tk' + n }) });
  await eventually(() => t.sources.length === 1, 'the EventSource');
  const src = t.sources[0];
  src.onopen();
  src.send(frame(1));
  src.send({ ...frame(2), type: 'teleport' });
  src.send(frame(3));
  assert.deepEqual(t.frames, [1]);
  assert.ok(src.closed);
  assert.ok(t.errors[0] instanceof FrameError);
  assert.equal(t.states.at(-1), 'failed');
  assert.equal(t.asked.length, 1, 'no new ticket past a protocol error');
});
