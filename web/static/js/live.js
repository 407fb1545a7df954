// Live application changes: one fetch-based Server-Sent Events stream of
// GET /api/app/events (the bearer header, like the frame stream), resumed
// from the last change's number after any drop, fanned out to the open
// views. A view hears about a change and reads what it shows again; the
// stream carries only what changed, never the data.

import { SSEParser } from './sse.js';
import { backoffDelay } from './stream.js';

/**
 * @typedef {import('./api.js').Api} Api
 * @typedef {{type: 'run.created'|'run.changed'|'schedule.changed'|'playbook.changed'|'workflow.changed'|'proposal.changed'|'audit.appended'|'reset', id: string, seq: number, at?: number}} ChangeEvent
 * @typedef {(e: ChangeEvent) => void} ChangeListener
 */

export class AppEvents {
  /** @param {Api} api */
  constructor(api) {
    this.api = api;
    /** The last change seen: where a reconnect resumes (-1: none yet, from now). */
    this.cursor = -1;
    this.attempt = 0;
    this.stopped = true;
    /** @type {AbortController | null} */
    this.ctrl = null;
    /** @type {Set<ChangeListener>} */
    this.listeners = new Set();
    /** @type {any} */
    this.timer = null;
    /** Whether the stream is open (tests and the views read it). */
    this.open = false;
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ctrl) this.ctrl.abort();
    this.open = false;
  }

  /** @param {ChangeListener} fn @returns {() => void} the unsubscribe */
  subscribe(fn) {
    this.listeners.add(fn);
    return () => { this.listeners.delete(fn); };
  }

  async connect() {
    if (this.stopped) return;
    const ctrl = new AbortController();
    this.ctrl = ctrl;
    const path = '/api/app/events' + (this.cursor >= 0 ? `?after=${this.cursor}` : '');
    try {
      const res = await this.api.fetchImpl(this.api.baseUrl + path, {
        headers: { ...this.api.headers(), Accept: 'text/event-stream' },
        cache: 'no-store', credentials: 'same-origin', signal: ctrl.signal,
      });
      // Refused (signed out, a daemon without the stream): the views keep
      // their own refresh; nothing to retry with the same credentials.
      if (res.status === 401 || res.status === 403 || res.status === 404) { this.stopped = true; return; }
      if (res.ok && res.body) await this.read(res.body);
    } catch { /* a drop: reconnect below */ }
    this.open = false;
    if (this.stopped || this.ctrl !== ctrl) return;
    const delay = backoffDelay(this.attempt++, { baseMs: 500, capMs: 15000 });
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** @param {ReadableStream<Uint8Array>} body */
  async read(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    const parser = new SSEParser({
      onComment: (c) => { if (c === 'connected') { this.attempt = 0; this.open = true; } },
      onEvent: (ev) => {
        /** @type {ChangeEvent} */
        let e;
        try { e = JSON.parse(ev.data); } catch { return; }
        if (!e || typeof e.seq !== 'number') return;
        if (e.type !== 'reset' && e.seq <= this.cursor) return; // a redelivery
        this.cursor = e.seq;
        for (const fn of [...this.listeners]) {
          try { fn(e); } catch (err) { console.warn('a live view failed to update', err); }
        }
      },
    });
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.push(decoder.decode(value, { stream: true }));
      }
    } finally {
      try { reader.releaseLock(); } catch { /* released */ }
    }
  }
}

/**
 * Calls fn at most once per wait for a burst of calls (a run's created,
 * claimed and finished changes arrive together): the last call of the
 * burst runs after wait ms.
 * @param {() => void} fn @param {number} wait
 */
export function coalesce(fn, wait) {
  /** @type {any} */
  let t = null;
  const run = () => { t = null; fn(); };
  const call = () => { if (t === null) t = setTimeout(run, wait); };
  call.cancel = () => { clearTimeout(t); t = null; };
  return call;
}
