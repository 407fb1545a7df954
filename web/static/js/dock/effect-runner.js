// Effects (docs/design.md §8) as the dock meets them: decide whether this browser
// applies an effect (never twice, never from history, never when expired or
// superseded, never when another browser already acknowledged it: the
// server's state of the effect decides), let the cockpit apply it, remember
// the outcome, then send the one acknowledgement. A replay repeats an
// undelivered acknowledgement but never the effect.

import { ApiError, errorText } from '../api.js';
import { EffectLog } from '../storage.js';
import { checkFresh } from '../effects.js';

/**
 * @typedef {import('../frames.js').Frame} Frame
 * @typedef {import('../frames.js').Effect} Effect
 * @typedef {import('../storage.js').EffectRecord} EffectRecord
 * @typedef {import('../storage.js').KeyValueStorage} KeyValueStorage
 * @typedef {import('../operator-api.js').OperatorClient} OperatorClient
 * @typedef {import('./transcript.js').Mode} Mode
 * @typedef {{status: 'applied', clientRoute: string} | {status: 'rejected', rejectionCode: import('../effects.js').RejectionCode, reason: string}} EffectOutcome
 * @typedef {(effectId: string, state: string, text: string, live?: boolean) => void} ShowEffect
 */

export class EffectRunner {
  /**
   * @param {{client: OperatorClient, storage: KeyValueStorage, apply: (e: Effect) => Promise<EffectOutcome>, show: ShowEffect}} o
   */
  constructor(o) {
    this.o = o;
    this.log = new EffectLog(o.storage);
    /** Effects applied by this page since it loaded (tests read it). */
    this.appliedCount = 0;
  }

  /**
   * Decides about one effect. Two tabs of the cockpit may follow the same
   * conversation: a lock per effect (Web Locks, shared by the origin's
   * tabs) makes the check of the effect log and the application one step,
   * so only one tab applies it.
   * @param {Frame} f @param {Mode} mode @param {boolean} superseded
   */
  async handle(f, mode, superseded) {
    const locks = globalThis.navigator && navigator.locks;
    if (locks && mode !== 'history') {
      await locks.request('studio.effect.' + f.payload.effectId, () => this.decide(f, mode, superseded));
      return;
    }
    await this.decide(f, mode, superseded);
  }

  /** @param {Frame} f @param {Mode} mode @param {boolean} superseded */
  async decide(f, mode, superseded) {
    const p = f.payload;
    const id = /** @type {string} */ (p.effectId);
    const live = mode === 'live';
    const rec = this.log.get(id);
    if (rec) {
      this.o.show(id, rec.status, rec.status === 'applied' ? 'applied' : rec.status === 'rejected' ? `rejected (${rec.rejectionCode})` : 'not applied');
      if (!rec.acked && rec.status !== 'skipped') await this.ack(f, rec);
      return;
    }
    // What the server knows: another browser (whose effect log this one
    // cannot see) may have acknowledged it already.
    const server = await this.serverState(f);
    if (server && server.status === 'applied') {
      this.o.show(id, 'applied', 'applied in another window', live);
      return;
    }
    if (server && server.status === 'rejected') {
      this.o.show(id, 'rejected', `rejected in another window (${server.rejectionCode})`, live);
      return;
    }
    if (mode === 'history') {
      this.o.show(id, 'not-applied', server && server.status === 'expired' ? 'not applied (expired)' : 'not applied in this browser');
      return;
    }
    const stale = checkFresh(p, { nowSeconds: Date.now() / 1000, superseded });
    if (stale || (server && server.status === 'expired')) {
      this.o.show(id, 'expired', `not applied: ${stale ? stale.reason : 'it expired before any window applied it'}`, live);
      return;
    }
    const outcome = await this.o.apply(p.effect);
    /** @type {EffectRecord} */
    const r = outcome.status === 'applied'
      ? { status: 'applied', clientRoute: outcome.clientRoute, acked: false, at: Date.now(), conversationId: f.conversationId }
      : { status: 'rejected', rejectionCode: outcome.rejectionCode, acked: false, at: Date.now(), conversationId: f.conversationId };
    // Remembered before the acknowledgement: a reload never applies it twice.
    this.log.put(id, r);
    if (outcome.status === 'applied') this.appliedCount++;
    this.o.show(id, r.status, outcome.status === 'applied' ? 'applied' : `rejected (${outcome.rejectionCode}): ${outcome.reason}`, live);
    await this.ack(f, r);
  }

  /**
   * The effect's state on the server, or null when it cannot be read (the
   * local checks then decide, as before the server could be asked).
   * @param {Frame} f
   */
  async serverState(f) {
    try {
      return await this.o.client.getEffect(f.conversationId, /** @type {string} */ (f.payload.effectId));
    } catch {
      return null;
    }
  }

  /**
   * Sends the one acknowledgement of an effect (repeats are identical).
   * @param {Frame} f @param {EffectRecord} rec
   */
  async ack(f, rec) {
    const id = f.payload.effectId;
    const body = rec.status === 'applied'
      ? { status: /** @type {const} */ ('applied'), clientRoute: /** @type {string} */ (rec.clientRoute) }
      : { status: /** @type {const} */ ('rejected'), rejectionCode: /** @type {string} */ (rec.rejectionCode) };
    try {
      await this.o.client.ackEffect(f.conversationId, id, body);
      this.log.markAcked(id);
    } catch (e) {
      if (e instanceof ApiError && e.code === 'conflict') {
        // Another browser acknowledged it between this one's look-up and its
        // application: say what the server kept.
        this.log.markAcked(id);
        const server = await this.serverState(f);
        this.o.show(id, rec.status, server && server.status === 'applied'
          ? `${rec.status === 'applied' ? 'applied here and' : `${rec.status} here;`} applied in another window`
          : `${rec.status} here; another window acknowledged it first (${server ? server.status : 'conflict'})`);
      } else if (e instanceof ApiError && e.status !== 0 && !e.retryable) {
        // The server decided (expired, refused): repeating the same ack cannot change that.
        this.log.markAcked(id);
        this.o.show(id, e.code === 'stale_context' ? 'expired' : 'ack-error', e.code === 'stale_context'
          ? `${rec.status === 'applied' ? 'applied here, but ' : ''}the server says it expired (stale_context)`
          : `acknowledgement refused: ${e.code}: ${e.message}`);
      } else {
        this.o.show(id, 'ack-pending', `${rec.status}; acknowledgement not delivered yet (${errorText(e)}), it is repeated on reconnect`);
      }
    }
  }
}
