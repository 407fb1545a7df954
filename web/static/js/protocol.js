// The operator protocol client (ADR-0083 D2, D5, D6; DESIGN.md §4-§6), usable
// without the dock: typed requests, fetch-based Server-Sent Events with the
// bearer header, strict frame validation, a per-conversation cursor kept in
// localStorage, de-duplication by (conversationId, sequence), reconnection
// with capped exponential backoff from the cursor, replay_gap recovery, and
// an EventSource transport for stream tickets. It never resubmits a turn:
// reconnecting repeats reads only.

import { Api, ApiError, query } from './api.js';

export { ApiError };

/** The frame types of version 1. */
export const FRAME_TYPES = /** @type {const} */ (['text', 'tool_call', 'tool_result', 'ui_command', 'proposal', 'confirmation', 'error', 'done']);
export const PROTOCOL_VERSION = 1;
export const REJECTION_CODES = /** @type {const} */ (['unsupported', 'invalid_params', 'stale_context', 'not_visible', 'client_error']);

/**
 * @typedef {'text'|'tool_call'|'tool_result'|'ui_command'|'proposal'|'confirmation'|'error'|'done'} FrameType
 * @typedef {{version: 1, conversationId: string, requestId: string, sequence: number, type: FrameType, payload: any, createdAt: number}} Frame
 * @typedef {{kind: string, space?: string, params?: Record<string, any>, selection?: Record<string, string>, form?: string, values?: Record<string, any>, theme?: string}} Effect
 * @typedef {{effectId: string, effect: Effect, expiresAt: number}} UiCommandPayload
 * @typedef {{kind: string, id: string, version: number | string}} ResourceVersion  (an integer; frames stored before the wire rule may hold a string)
 * @typedef {{id: string, commandType: string, command: Record<string, any>, commandHash: string, risk: 'mutate'|'execute'|'admin', summary: string, target: ResourceVersion | null, idempotencyKey: string, expiresAt: number}} CommandProposal
 * @typedef {{space: string, route: string, project?: string, selection?: Record<string, string>, filters?: Record<string, any>}} ContextSnapshot
 * @typedef {{id: string, project: string|null, title: string|null, status: string, lastSequence: number, activeRequestId: string|null, createdAt: number, updatedAt: number, archivedAt: number|null}} Conversation
 */

/** A frame the client must not apply: unknown version or type, or a malformed envelope. */
export class FrameError extends Error {
  /** @param {string} code protocol_version | protocol @param {string} message */
  constructor(code, message) {
    super(message);
    this.name = 'FrameError';
    this.code = code;
  }
}

/** @param {unknown} v @returns {v is Record<string, any>} */
function isObject(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** @param {unknown} v */
function isString(v) {
  return typeof v === 'string' && v.length > 0;
}

/**
 * Parses and validates one frame. Throws FrameError for an unknown version,
 * an unknown type, or a payload that does not have its type's shape.
 * @param {string | unknown} data the data of one SSE event, or a decoded object
 * @returns {Frame}
 */
export function parseFrame(data) {
  /** @type {unknown} */
  let f = data;
  if (typeof data === 'string') {
    try {
      f = JSON.parse(data);
    } catch {
      throw new FrameError('protocol', 'a stream event is not JSON');
    }
  }
  if (!isObject(f)) throw new FrameError('protocol', 'a frame is not an object');
  if (f.version !== PROTOCOL_VERSION) {
    throw new FrameError('protocol_version', `frame version ${JSON.stringify(f.version)} is not supported (this cockpit speaks version ${PROTOCOL_VERSION})`);
  }
  if (!FRAME_TYPES.includes(f.type)) {
    throw new FrameError('protocol', `unknown frame type ${JSON.stringify(f.type)}`);
  }
  if (!isString(f.conversationId) || !isString(f.requestId)) throw new FrameError('protocol', 'frame lacks conversationId or requestId');
  if (!Number.isInteger(f.sequence) || f.sequence < 1) throw new FrameError('protocol', 'frame sequence must be a positive integer');
  if (typeof f.createdAt !== 'number') throw new FrameError('protocol', 'frame lacks createdAt');
  const p = f.payload;
  if (!isObject(p)) throw new FrameError('protocol', `${f.type} frame has no payload object`);
  const bad = (/** @type {string} */ what) => new FrameError('protocol', `${f.type} frame ${what}`);
  switch (f.type) {
    case 'text':
      if (typeof p.content !== 'string' || (p.format !== 'plain' && p.format !== 'markdown')) throw bad('needs content and a plain or markdown format');
      break;
    case 'tool_call':
      if (!isString(p.callId) || !isString(p.tool) || !isObject(p.arguments)) throw bad('needs callId, tool and arguments');
      break;
    case 'tool_result':
      if (!isString(p.callId) || typeof p.ok !== 'boolean') throw bad('needs callId and ok');
      if (!p.ok && !isObject(p.error)) throw bad('that failed needs an error');
      break;
    case 'ui_command':
      if (!isString(p.effectId) || !isObject(p.effect) || typeof p.effect.kind !== 'string' || typeof p.expiresAt !== 'number') throw bad('needs effectId, effect and expiresAt');
      break;
    case 'proposal': {
      const pr = p.proposal;
      if (!isObject(pr) || !isString(pr.id) || !isString(pr.commandHash) || !isString(pr.commandType) || !isObject(pr.command) ||
        !['mutate', 'execute', 'admin'].includes(pr.risk) || typeof pr.expiresAt !== 'number' || typeof pr.summary !== 'string') {
        throw bad('needs a proposal with id, commandType, command, commandHash, risk, summary and expiresAt');
      }
      if (pr.target !== null && pr.target !== undefined && !(isObject(pr.target) && (Number.isInteger(pr.target.version) || typeof pr.target.version === 'string'))) throw bad('target must be {kind, id, version} or null');
      break;
    }
    case 'confirmation':
      // Unknown states are allowed: they are treated as terminal and unapplied (DESIGN.md §4).
      if (!isString(p.proposalId) || !isString(p.state)) throw bad('needs proposalId and state');
      break;
    case 'error':
      if (!isObject(p.error) || typeof p.error.code !== 'string') throw bad('needs an error with a code');
      break;
    case 'done':
      if (!['completed', 'failed', 'cancelled'].includes(p.outcome) || !Number.isInteger(p.lastSequence)) throw bad('needs outcome and lastSequence');
      break;
  }
  return /** @type {Frame} */ (f);
}

/**
 * @typedef {{id?: string, data: string, event?: string}} SSEEvent
 * @typedef {{onEvent: (ev: SSEEvent) => void, onComment?: (text: string) => void, onRetry?: (ms: number) => void}} SSEHandlers
 */

/**
 * An incremental Server-Sent Events parser (the WHATWG event-stream rules):
 * LF, CR or CRLF line ends, also split across chunks; comments; multi-line
 * data; id and retry fields. Feed it text with push().
 */
export class SSEParser {
  /** @param {SSEHandlers} handlers */
  constructor(handlers) {
    this.h = handlers;
    this.buf = '';
    this.skipLF = false; // the previous chunk ended in CR: a leading LF belongs to it
    /** @type {string[]} */
    this.data = [];
    this.id = undefined;
    this.event = undefined;
    this.lastEventId = '';
  }

  /** @param {string} chunk */
  push(chunk) {
    if (this.skipLF && chunk.startsWith('\n')) chunk = chunk.slice(1);
    this.skipLF = false;
    this.buf += chunk;
    let start = 0;
    for (;;) {
      const cr = this.buf.indexOf('\r', start);
      const lf = this.buf.indexOf('\n', start);
      if (cr < 0 && lf < 0) break;
      let end, next;
      if (cr >= 0 && (lf < 0 || cr < lf)) {
        end = cr;
        if (cr + 1 < this.buf.length) {
          next = this.buf[cr + 1] === '\n' ? cr + 2 : cr + 1;
        } else {
          next = cr + 1;
          this.skipLF = true; // CR at the end of the chunk: a following LF is part of it
        }
      } else {
        end = /** @type {number} */ (lf);
        next = end + 1;
      }
      this.line(this.buf.slice(start, end));
      start = next;
    }
    this.buf = this.buf.slice(start);
  }

  /** Ends the stream: an event without its blank line is not dispatched (per the spec). */
  end() {
    this.buf = '';
    this.data = [];
  }

  /** @param {string} line */
  line(line) {
    if (line === '') {
      if (this.data.length > 0) {
        const ev = { data: this.data.join('\n'), id: this.id, event: this.event };
        this.data = [];
        this.event = undefined;
        this.id = undefined;
        this.h.onEvent(ev);
      } else {
        this.event = undefined;
        this.id = undefined;
      }
      return;
    }
    if (line.startsWith(':')) {
      if (this.h.onComment) this.h.onComment(line.slice(1).trim());
      return;
    }
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'id':
        if (!value.includes('\0')) {
          this.id = value;
          this.lastEventId = value;
        }
        break;
      case 'event':
        this.event = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value) && this.h.onRetry) this.h.onRetry(Number(value));
        break;
    }
  }
}

/**
 * @typedef {{getItem(key: string): string | null, setItem(key: string, value: string): void, removeItem(key: string): void}} KeyValueStorage
 */

/** An in-memory storage for tests and for browsers with storage disabled. */
export class MemoryStorage {
  constructor() {
    /** @type {Map<string, string>} */
    this.m = new Map();
  }
  /** @param {string} k */
  getItem(k) { return this.m.has(k) ? /** @type {string} */ (this.m.get(k)) : null; }
  /** @param {string} k @param {string} v */
  setItem(k, v) { this.m.set(k, String(v)); }
  /** @param {string} k */
  removeItem(k) { this.m.delete(k); }
}

/** @returns {KeyValueStorage} */
export function defaultStorage() {
  try {
    const s = globalThis.localStorage;
    if (s) {
      s.setItem('studio.probe', '1');
      s.removeItem('studio.probe');
      return s;
    }
  } catch {
    // storage disabled: fall back to memory
  }
  return new MemoryStorage();
}

/** The last sequence this client has processed, per conversation. */
export class CursorStore {
  /** @param {KeyValueStorage} storage @param {string} [prefix] */
  constructor(storage, prefix = 'studio.cursor.') {
    this.s = storage;
    this.prefix = prefix;
  }
  /** @param {string} conversationId */
  get(conversationId) {
    const v = Number(this.s.getItem(this.prefix + conversationId));
    return Number.isInteger(v) && v > 0 ? v : 0;
  }
  /** Moves the cursor forward (never back, except through reset). @param {string} conversationId @param {number} seq */
  advance(conversationId, seq) {
    if (seq > this.get(conversationId)) this.s.setItem(this.prefix + conversationId, String(seq));
  }
  /** @param {string} conversationId @param {number} seq */
  reset(conversationId, seq) {
    if (seq > 0) this.s.setItem(this.prefix + conversationId, String(seq));
    else this.s.removeItem(this.prefix + conversationId);
  }
}

/**
 * @typedef {{status: 'applied'|'rejected'|'skipped', clientRoute?: string, rejectionCode?: string, acked: boolean, at: number, conversationId: string}} EffectRecord
 */

/**
 * Effects this browser has handled, by effect id, in localStorage. An id is
 * recorded after the effect is applied and before its acknowledgement is
 * sent, so a replay after a reload (or a lost acknowledgement) never applies
 * it twice: it only repeats the identical acknowledgement.
 */
export class EffectLog {
  /** @param {KeyValueStorage} storage @param {string} [key] @param {number} [max] */
  constructor(storage, key = 'studio.effects', max = 1000) {
    this.s = storage;
    this.key = key;
    this.max = max;
  }
  /** @returns {Record<string, EffectRecord>} */
  all() {
    try {
      const v = JSON.parse(this.s.getItem(this.key) || '{}');
      return isObject(v) ? /** @type {Record<string, EffectRecord>} */ (v) : {};
    } catch {
      return {};
    }
  }
  /** @param {string} id @returns {EffectRecord | undefined} */
  get(id) { return this.all()[id]; }
  /** @param {string} id @param {EffectRecord} rec */
  put(id, rec) {
    const all = this.all();
    all[id] = rec;
    const ids = Object.keys(all);
    if (ids.length > this.max) {
      ids.sort((a, b) => all[a].at - all[b].at);
      for (const old of ids.slice(0, ids.length - this.max)) delete all[old];
    }
    this.s.setItem(this.key, JSON.stringify(all));
  }
  /** @param {string} id */
  markAcked(id) {
    const rec = this.get(id);
    if (rec) this.put(id, { ...rec, acked: true });
  }
}

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
 * The typed operator API (DESIGN.md §5).
 */
export class OperatorClient {
  /** @param {Api} api */
  constructor(api) {
    this.api = api;
  }
  /** @param {{status?: string, limit?: number, cursor?: string}} [o] @returns {Promise<{conversations: Conversation[], nextCursor?: string}>} */
  listConversations(o = {}) { return this.api.get('/api/operator/conversations' + query(o)); }
  /** @param {{title?: string, project?: string}} [body] @returns {Promise<Conversation>} */
  createConversation(body = {}) { return this.api.post('/api/operator/conversations', body); }
  /** @param {string} id @param {number} after @param {number} [limit] @returns {Promise<{conversation: Conversation, frames: any[], hasMore: boolean, nextAfterSequence: number, latestSequence: number}>} */
  getConversation(id, after = 0, limit = 500) { return this.api.get(`/api/operator/conversations/${enc(id)}` + query({ after_sequence: after, limit })); }
  /** @param {string} id @param {{title?: string, status?: 'active'|'archived'}} body @returns {Promise<Conversation>} */
  updateConversation(id, body) { return this.api.patch(`/api/operator/conversations/${enc(id)}`, body); }
  /** @param {string} id @returns {Promise<Conversation>} */
  deleteConversation(id) { return this.api.del(`/api/operator/conversations/${enc(id)}`); }
  /**
   * Submits one turn, once. A failure is returned to the caller, never retried here.
   * @param {string} id @param {string} instruction @param {ContextSnapshot} context @param {number} expectedLastSequence
   * @returns {Promise<{conversationId: string, requestId: string, acceptedSequence: number}>}
   */
  submitTurn(id, instruction, context, expectedLastSequence) {
    return this.api.post(`/api/operator/conversations/${enc(id)}/turns`, { instruction, context, expectedLastSequence });
  }
  /** @param {string} id @param {string} requestId */
  cancel(id, requestId) { return this.api.post(`/api/operator/conversations/${enc(id)}/requests/${enc(requestId)}/cancel`); }
  /**
   * @param {string} id @param {string} effectId
   * @param {{status: 'applied', clientRoute: string} | {status: 'rejected', rejectionCode: string}} body
   */
  ackEffect(id, effectId, body) { return this.api.post(`/api/operator/conversations/${enc(id)}/effects/${enc(effectId)}/ack`, body); }
  /**
   * Confirms a proposal with the hash and target version it was shown with.
   * @param {string} id @param {CommandProposal} proposal
   */
  confirmProposal(id, proposal) {
    /** @type {{expectedCommandHash: string, expectedTargetVersion?: number | string}} */
    const body = { expectedCommandHash: proposal.commandHash };
    if (proposal.target) body.expectedTargetVersion = proposal.target.version;
    return this.api.post(`/api/operator/conversations/${enc(id)}/proposals/${enc(proposal.id)}/confirm`, body);
  }
  /** @param {string} id @param {string} proposalId */
  denyProposal(id, proposalId) { return this.api.post(`/api/operator/conversations/${enc(id)}/proposals/${enc(proposalId)}/deny`); }
  /** @param {string} id @returns {Promise<{proposals: any[]}>} */
  listProposals(id) { return this.api.get(`/api/operator/conversations/${enc(id)}/proposals`); }
  /** @param {string} conversationId @param {number} afterSequence @returns {Promise<{ticket: string, expiresAt: number}>} */
  createTicket(conversationId, afterSequence) { return this.api.post('/api/operator/stream-tickets', { conversationId, afterSequence }); }
  /** @returns {Promise<any>} */
  routes() { return this.api.get('/api/operator/routes'); }
}

/** @param {string} s */
function enc(s) { return encodeURIComponent(s); }

/**
 * @typedef {'idle'|'connecting'|'open'|'reconnecting'|'closed'|'failed'} StreamState
 * @typedef {object} StreamHandlers
 * @property {(frame: Frame) => void | Promise<void>} onFrame each new frame, in order, once
 * @property {(state: StreamState, info?: {attempt?: number, delayMs?: number, error?: unknown}) => void} [onState]
 * @property {(notice: {kind: 'replay_gap', from: number, to: number}) => void} [onNotice]
 * @property {(err: FrameError | ApiError) => void} [onError] a stop: protocol error, auth, not found
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
        credentials: 'omit',
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
    this.queue = this.queue.then(async () => {
      try {
        await this.h.onFrame(f);
      } finally {
        this.o.cursors.advance(this.conversationId, f.sequence);
      }
    });
  }
}

/**
 * Follows a stream with the browser's EventSource, which cannot send an
 * Authorization header: each connection redeems a fresh one-use stream
 * ticket (DESIGN.md §6), the only credential that may appear in a URL.
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
