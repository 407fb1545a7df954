// What a region shows while it loads and when it failed: a sentence a
// person reads, the daemon's code beside it.

import { h } from '../dom.js';
import { ApiError } from '../api.js';
import { errorSentence } from '../words.js';

/** @param {string} [text] */
export function loading(text = 'Loading…') {
  return h('p', { class: 'loading muted', role: 'status', text });
}

/**
 * An error panel: a sentence a person reads (“No run deadbeef exists”),
 * the daemon's code small beside it for a bug report.
 * @param {unknown} e
 */
export function errorBox(e) {
  const code = e instanceof ApiError ? e.code : 'client_error';
  const msg = e instanceof Error ? e.message : String(e);
  return h('div', { class: 'error-box', role: 'alert', 'data-code': code }, h('span', { text: errorSentence({ code, message: msg }) + ' ' }), h('small', { class: 'code muted', text: `(${code})` }));
}
