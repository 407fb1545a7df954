// Following one conversation's frames (docs/design.md §11): fetch-based SSE with
// the bearer header, a cursor kept per conversation, de-duplication by
// (conversationId, sequence), reconnection with capped exponential backoff
// from the cursor, replay_gap recovery, and an EventSource transport with
// stream tickets. It never resubmits a turn: reconnecting repeats reads only.

import { ApiError, query, enc } from './api.js';
import { FrameError, parseFrame } from './frames.js';
import { SSEParser } from './sse.js';

/**
 * @typedef {import('./api.js').Api} Api
 * @typedef {import('./frames.js').Frame} Frame
 * @typedef {import('./storage.js').CursorStore} CursorStore
 * @typedef {import('./operator-api.js').OperatorClient} OperatorClient
 */

/**
 * Capped exponential backoff: base * 2^attempt, at most cap, with jitter in
 * [delay/2, delay].
 * @param {number} attempt 0 for the first retry
 * @param {{baseMs?: number, capMs?: number, random?: () => number}} [o]
 */
export function backoffDelay(attempt, o = {}) {
  const base = o.baseMs ?? 500;
  const cap = o.capMs ?? 30000;
  const rnd = o.random ?? Math.random;
  const d = Math.min(cap, base * 2 ** Math.min(attempt, 30));
  return Math.round(d / 2 + (d / 2) * rnd());
}

/**
 * @typedef {'idle'|'connecting'|'open'|'reconnecting'|'closed'|'failed'} StreamState
 * @typedef {object} StreamHandlers
 * @property {(frame: Frame) => void | Promise<void>} onFrame each new frame, in order, once
 * @property {(state: StreamState, info?: {attempt?: number, delayMs?: number, error?: unknown}) => void} [onState]
 * @property {(notice: {kind: 'replay_gap', from: number, to: number}) => void} [onNotice]
 * @property {(err: FrameError | ApiError) => void} [onError] a stop: protocol error, auth, not found
 * @property {(activeTurn: any) => void} [onStatus] the active turn's progress (the server's `: status {json}` comment; null when none runs)
 */

/**
 * @typedef {object} StreamOptions
 * @property {Api} api
 * @property {string} conversationId
 * @property {CursorStore} cursors
 * @property {number} [after] start after this sequence instead of the stored cursor
 * @property {number} [baseDelayMs]
 * @property {number} [maxDelayMs]
 * @property {number} [idleTimeoutMs] reconnect when nothing (not even a heartbeat) arrived this long
 * @property {() => number} [random]
 * @property {(fn: () => void, ms: number) => any} [setTimeout]
 * @property {(id: any) => void} [clearTimeout]
 */

/**
 * Follows one conversation's frames over fetch-based SSE with the bearer
 * header. Delivers every frame after the cursor exactly once, in sequence
 * order, and advances the stored cursor after each delivered frame.
 */
export class ConversationStream {
  /** @param {StreamOptions} opts @param {StreamHandlers} handlers */
  constructor(opts, handlers) {
    this.o = opts;
    this.h = handlers;
    this.conversationId = opts.conversationId;
    this.cursor = opts.after ?? opts.cursors.get(opts.conversationId);
    /** @type {Set<string>} */
    this.seen = new Set();
    this.attempt = 0;
    /** @type {StreamState} */
    this.state = 'idle';
    this.stopped = false;
    /** @type {AbortController | null} */
    this.ctrl = null;
    this.timer = null;
    this.idleTimer = null;
    this.setT = opts.setTimeout || ((fn, ms) => globalThis.setTimeout(fn, ms));
    this.clearT = opts.clearTimeout || ((id) => globalThis.clearTimeout(id));
    /** @type {Promise<void>} */
    this.queue = Promise.resolve();
  }

  /** @param {StreamState} s @param {any} [info] */
  setState(s, info) {
    this.state = s;
    if (this.h.onState) this.h.onState(s, info);
  }

  start() {
    this.stopped = false;
    this.connect();
    return this;
  }

  /** Stops for good: no reconnect. */
  stop() {
    this.stopped = true;
    if (this.timer) this.clearT(this.timer);
    if (this.idleTimer) this.clearT(this.idleTimer);
    this.timer = null;
    if (this.ctrl) this.ctrl.abort();
    this.setState('closed');
  }

  /** Reconnects now (after a stop on error, or to skip a backoff wait). */
  reconnectNow() {
    if (this.timer) this.clearT(this.timer);
    this.timer = null;
    if (this.ctrl) this.ctrl.abort();
    this.stopped = false;
    this.connect();
  }

  armIdle() {
    if (this.idleTimer) this.clearT(this.idleTimer);
    const ms = this.o.idleTimeoutMs ?? 45000;
    if (ms > 0) this.idleTimer = this.setT(() => { if (this.ctrl) this.ctrl.abort(new Error('idle')); }, ms);
  }

  /** @returns {Promise<void>} */
  async connect() {
    if (this.stopped) return;
    const ctrl = new AbortController();
    this.ctrl = ctrl;
    this.setState(this.attempt === 0 ? 'connecting' : 'reconnecting', { attempt: this.attempt });
    const path = `/api/operator/conversations/${enc(this.conversationId)}/stream?after_sequence=${this.cursor}`;
    /** @type {unknown} */
    let failure = null;
    try {
      const res = await this.o.api.fetchImpl(this.o.api.baseUrl + path, {
        headers: { ...this.o.api.headers(), Accept: 'text/event-stream' },
        cache: 'no-store',
        credentials: 'same-origin',
        signal: ctrl.signal,
      });
      if (!res.ok) {
        const body = await res.json().catch(() => null);
        const err = new ApiError(res.status, body && body.error ? body.error : { code: 'service_failure', message: `HTTP ${res.status}` });
        if (err.code === 'replay_gap' && Number.isInteger(err.details.earliestAfterSequence)) {
          const to = err.details.earliestAfterSequence;
          if (this.h.onNotice) this.h.onNotice({ kind: 'replay_gap', from: this.cursor, to });
          this.cursor = to;
          this.o.cursors.reset(this.conversationId, to);
          this.attempt = 0;
          return this.connect();
        }
        if (res.status === 401 || res.status === 403 || res.status === 404 || res.status === 400) {
          if (this.h.onError) this.h.onError(err);
          this.stopped = true;
          this.setState('failed', { error: err });
          return;
        }
        throw err;
      }
      if (!res.body) throw new Error('the stream has no body');
      await this.read(res.body, ctrl);
    } catch (e) {
      failure = e;
    } finally {
      if (this.idleTimer) this.clearT(this.idleTimer);
    }
    if (failure instanceof FrameError) {
      this.stopped = true;
      if (this.h.onError) this.h.onError(failure);
      this.setState('failed', { error: failure });
      if (this.ctrl === ctrl) ctrl.abort();
      return;
    }
    if (this.stopped || this.ctrl !== ctrl) return;
    // The stream ended (server shutdown, network, idle): reconnect from the cursor.
    const delayMs = backoffDelay(this.attempt, { baseMs: this.o.baseDelayMs, capMs: this.o.maxDelayMs, random: this.o.random });
    this.attempt++;
    this.setState('reconnecting', { attempt: this.attempt, delayMs, error: failure });
    this.timer = this.setT(() => { this.timer = null; this.connect(); }, delayMs);
  }

  /** @param {ReadableStream<Uint8Array>} body @param {AbortController} ctrl */
  async read(body, ctrl) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    /** @type {FrameError | null} */
    let frameErr = null;
    const parser = new SSEParser({
      onComment: (c) => {
        if (c === 'connected') {
          this.attempt = 0;
          this.setState('open');
        } else if (c.startsWith('status ') && this.h.onStatus) {
          // Progress, not a frame: a comment moves no cursor. A malformed one is ignored.
          let v = null;
          try { v = JSON.parse(c.slice(7)); } catch { return; }
          if (v && typeof v === 'object' && 'activeTurn' in v) this.h.onStatus(v.activeTurn);
        }
      },
      onEvent: (ev) => {
        if (frameErr) return;
        try {
          this.deliver(parseFrame(ev.data));
        } catch (e) {
          if (e instanceof FrameError) frameErr = e;
          else throw e;
        }
      },
    });
    this.armIdle();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        this.armIdle();
        parser.push(decoder.decode(value, { stream: true }));
        if (frameErr) throw frameErr;
        await this.queue;
      }
      parser.push(decoder.decode());
      parser.end();
      if (frameErr) throw frameErr;
    } finally {
      try { reader.releaseLock(); } catch { /* already released */ }
      void ctrl;
    }
  }

  /** @param {Frame} f */
  deliver(f) {
    if (f.conversationId !== this.conversationId) throw new FrameError('protocol', 'a frame of another conversation arrived on this stream');
    const key = f.conversationId + ':' + f.sequence;
    if (f.sequence <= this.cursor || this.seen.has(key)) return; // a redelivery after reconnect
    this.seen.add(key);
    this.cursor = f.sequence;
    // Frames are handed over one at a time, in order, even when the handler is async.
    // A handler that fails on one frame loses that frame's rendering only:
    // a rejected queue would skip every later frame while the cursor moved on.
    this.queue = this.queue.then(async () => {
      try {
        await this.h.onFrame(f);
      } catch (e) {
        console.error('the stream\'s frame handler failed on frame', f.sequence, e);
      } finally {
        this.o.cursors.advance(this.conversationId, f.sequence);
      }
    });
  }
}

/**
 * Follows a stream with the browser's EventSource, which cannot send an
 * Authorization header: each connection redeems a fresh one-use stream
 * ticket (docs/design.md §12), the only credential that may appear in a URL.
 * EventSource's own reconnect would reuse a spent ticket, so an error closes
 * it and this reconnects with a new ticket from the cursor.
 * @param {{client: OperatorClient, conversationId: string, after?: number, EventSource?: typeof EventSource, baseDelayMs?: number, maxDelayMs?: number}} opts
 * @param {{onFrame: (f: Frame) => void, onState?: (s: StreamState) => void, onError?: (e: unknown) => void}} handlers
 * @returns {{stop: () => void, cursor: () => number}}
 */
export function followWithTicket(opts, handlers) {
  const ES = opts.EventSource || globalThis.EventSource;
  let cursor = opts.after || 0;
  let stopped = false;
  let attempt = 0;
  /** @type {EventSource | null} */
  let es = null;
  /** @type {any} */
  let timer = null;
  const open = async () => {
    if (stopped) return;
    handlers.onState && handlers.onState(attempt === 0 ? 'connecting' : 'reconnecting');
    let t;
    try {
      t = await opts.client.createTicket(opts.conversationId, cursor);
    } catch (e) {
      if (e instanceof ApiError && !e.retryable && e.status !== 0) {
        stopped = true;
        handlers.onError && handlers.onError(e);
        handlers.onState && handlers.onState('failed');
        return;
      }
      retry();
      return;
    }
    if (stopped) return;
    const url = `${opts.client.api.baseUrl}/api/operator/conversations/${enc(opts.conversationId)}/stream` +
      query({ after_sequence: cursor, ticket: t.ticket });
    const src = new ES(url);
    es = src;
    src.onopen = () => {
      attempt = 0;
      handlers.onState && handlers.onState('open');
    };
    src.onmessage = (ev) => {
      let f;
      try {
        f = parseFrame(ev.data);
      } catch (e) {
        stopped = true;
        src.close();
        handlers.onError && handlers.onError(e);
        handlers.onState && handlers.onState('failed');
        return;
      }
      if (f.sequence <= cursor) return;
      cursor = f.sequence;
      handlers.onFrame(f);
    };
    src.onerror = () => {
      src.close();
      if (es === src) es = null;
      retry();
    };
  };
  const retry = () => {
    if (stopped) return;
    const d = backoffDelay(attempt++, { baseMs: opts.baseDelayMs, capMs: opts.maxDelayMs });
    handlers.onState && handlers.onState('reconnecting');
    timer = setTimeout(open, d);
  };
  open();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (es) es.close();
      handlers.onState && handlers.onState('closed');
    },
    cursor: () => cursor,
  };
}
