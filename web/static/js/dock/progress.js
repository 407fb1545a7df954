// The active turn's progress, in words: queued (with its place in line),
// working, retrying in N s, waiting for your confirmation, executing, the
// database unavailable (a restart or failover the turn rides out). The
// server knows it (GET conversation's activeTurn, the stream's status
// comment); this line only shows it, counting a retry's seconds down, and
// the messages waiting behind the turn.

import { h } from '../dom.js';

/**
 * @typedef {{requestId: string, state: 'queued'|'working'|'retrying'|'awaiting_confirmation'|'executing'|'database_unavailable', queuePosition?: number, attempt?: number, retryAt?: number, errorCode?: string, proposalId?: string, since: number, waiting?: {requestId: string, position: number, preview: string, since: number, cancelRequested?: boolean}[]}} TurnProgress
 */

/**
 * What a turn's progress says to a person at time now (Unix seconds);
 * request: the proposal it waits on is a person's approval request.
 * @param {TurnProgress | null | undefined} p @param {number} now @param {boolean} [request]
 * @returns {string}
 */
export function progressText(p, now, request = false) {
  if (!p) return '';
  const text = request && p.state === 'awaiting_confirmation' ? 'Waiting for a decision on the approval request' : stateText(p, now);
  const n = (p.waiting || []).length;
  if (!n) return text;
  const line = `then ${n === 1 ? '1 message waits' : `${n} messages wait`}: “${(p.waiting || [])[0].preview}”${n > 1 ? ' first' : ''}`;
  return text ? `${text} — ${line}` : line[0].toUpperCase() + line.slice(1);
}

/**
 * The active turn's state in words.
 * @param {TurnProgress} p @param {number} now @returns {string}
 */
function stateText(p, now) {
  switch (p.state) {
    case 'queued':
      return (p.queuePosition ? `Queued: ${p.queuePosition === 1 ? 'next' : `number ${p.queuePosition}`} in line for the model` : 'Queued for the model') +
        waited(p, now);
    case 'working':
      return 'Working…';
    case 'retrying': {
      const left = Math.max(0, Math.ceil((p.retryAt || now) - now));
      const why = p.errorCode === 'rate_limited' ? 'the model is rate limited' : `the model failed (${p.errorCode || 'error'})`;
      return `${why[0].toUpperCase()}${why.slice(1)}; retrying in ${left} s (attempt ${p.attempt || 2})`;
    }
    case 'awaiting_confirmation':
      return 'Waiting for a decision on the proposal'; // on a team, maybe someone else's
    case 'executing':
      return 'Executing the confirmed command…';
    case 'database_unavailable': {
      const left = Math.max(0, Math.ceil((p.retryAt || now) - now));
      return `The database is unavailable; retrying in ${left} s (attempt ${p.attempt || 2})`;
    }
  }
  return '';
}

/**
 * How long a queued turn has waited, once it is a while.
 * @param {TurnProgress} p @param {number} now @returns {string}
 */
function waited(p, now) {
  const s = Math.floor(now - p.since);
  if (!(s >= 5)) return '';
  return s < 120 ? ` (waiting ${s} s)` : ` (waiting ${Math.floor(s / 60)} min)`;
}

/** The progress line above the composer. */
export class ProgressLine {
  /** @param {{announce: (text: string) => void}} o */
  constructor(o) {
    this.o = o;
    /** @type {TurnProgress | null} */ this.p = null;
    /** the proposal waited on is a person's approval request */
    this.request = false;
    this.timer = /** @type {any} */ (null);
    this.el = h('p', { class: 'turn-progress muted small', 'data-progress': '', hidden: true });
  }

  /** @param {TurnProgress | null | undefined} p */
  set(p) {
    const before = this.p ? this.p.state : '';
    this.p = p || null;
    clearInterval(this.timer);
    this.timer = null;
    this.render();
    // Counting: a retry's seconds down, a queued turn's wait up.
    if (this.p && ['retrying', 'database_unavailable', 'queued'].includes(this.p.state)) this.timer = setInterval(() => this.render(), 1000);
    // A change of state is announced once; the countdown is not.
    if (this.p && this.p.state !== before && this.p.state !== 'working') this.o.announce(progressText(this.p, Date.now() / 1000, this.request));
  }

  /** Says whether the proposal waited on is an approval request. @param {boolean} request */
  setRequest(request) {
    if (request === this.request) return;
    this.request = request;
    this.render();
  }

  /** Clears the line when the turn it shows ended. @param {string} requestId */
  ended(requestId) {
    if (this.p && this.p.requestId === requestId) this.set(null);
  }

  render() {
    const text = progressText(this.p, Date.now() / 1000, this.request);
    this.el.hidden = !text;
    this.el.textContent = text;
    this.el.dataset.progress = this.p ? this.p.state : '';
    this.el.dataset.waiting = String(this.p && this.p.waiting ? this.p.waiting.length : 0);
  }

  destroy() {
    clearInterval(this.timer);
  }
}
