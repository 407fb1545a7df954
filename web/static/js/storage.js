// What the dock keeps in the browser's storage: the cursor of each
// conversation and the effects this browser has handled. Both survive a
// reload; neither is ever sent anywhere.

import { isObject } from './frames.js';

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
