// Table cells the spaces share: a short id, a run's status and time.

import { h, badge } from '../dom.js';
import { fmtTime, fmtRelative } from '../time.js';

/** @typedef {import('../appapi.js').Run} Run */

/** @param {string} id */
export function shortId(id) {
  return h('code', { class: 'id', title: id, text: id.slice(0, 8) });
}

/** A run status line for tables. @param {Run} r */
export function runCells(r) {
  return { status: badge(r.status), when: h('time', { datetime: new Date(r.createdAt * 1000).toISOString(), title: fmtTime(r.createdAt), text: fmtRelative(r.createdAt) }) };
}
