// The pages shown instead of the cockpit: sign-in (no token, or a refused
// one) and a fatal start-up error.

import { h, replace, uid } from './dom.js';
import { setToken } from './auth.js';

/** @param {HTMLElement} root @param {string} [message] */
export function showSignIn(root, message) {
  root.removeAttribute('aria-busy');
  const inputId = uid('token');
  const err = h('p', { class: 'form-error', role: 'alert', text: message || '' });
  const input = h('input', { id: inputId, type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': inputId + '-help' });
  const form = h('form', {
    class: 'signin card', 'aria-labelledby': 'signin-title',
    onsubmit: (/** @type {Event} */ ev) => {
      ev.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      setToken(t);
      location.reload();
    },
  },
  h('h1', { id: 'signin-title', text: 'Sign in to Studio' }),
  h('p', null, 'Sign in with your personal token (it starts with ', h('code', { text: 'stu_' }), '; an admin makes one with ',
    h('code', { text: 'studio tokens create NAME' }), '), or open the link that ', h('code', { text: 'studio serve' }),
    ' printed (it carries the daemon owner\'s token after #); ', h('code', { text: 'studio token' }), ' prints that one.'),
  h('label', { for: inputId, text: 'Token' }),
  input,
  h('p', { id: inputId + '-help', class: 'muted', text: 'Kept in this tab\'s session storage only; sent only in the Authorization header.' }),
  err,
  h('button', { type: 'submit', class: 'primary', text: 'Sign in' }));
  replace(root, h('main', { class: 'signin-page' }, form));
  input.focus();
}

/** @param {HTMLElement} root @param {string} title @param {unknown} e */
export function showFatal(root, title, e) {
  root.removeAttribute('aria-busy');
  replace(root, h('main', { class: 'signin-page' }, h('div', { class: 'card', role: 'alert' },
    h('h1', { text: title }),
    h('p', { text: e instanceof Error ? e.message : String(e) }),
    h('button', { type: 'button', onclick: () => location.reload(), text: 'Try again' }))));
}
