// Labelled form fields and the unsaved-edits mark.

import { h, uid } from '../dom.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext */

/**
 * A labelled form field.
 * @param {{label: string, name: string, value?: string, type?: string, textarea?: boolean, rows?: number, help?: string, required?: boolean, maxLength?: number, pattern?: string, placeholder?: string, oninput?: (ev: Event) => void}} o
 */
export function field(o) {
  const id = uid(o.name);
  const helpId = o.help ? id + '-help' : undefined;
  /** @type {Record<string, any>} */
  const attrs = { id, name: o.name, value: o.value || '', required: o.required, 'aria-describedby': helpId, placeholder: o.placeholder, oninput: o.oninput };
  if (o.maxLength) attrs.maxlength = String(o.maxLength);
  if (o.pattern) attrs.pattern = o.pattern;
  const input = o.textarea ? h('textarea', { ...attrs, rows: String(o.rows || 4) }) : h('input', { ...attrs, type: o.type || 'text', autocomplete: 'off' });
  return h('div', { class: 'field' }, h('label', { for: id, text: o.label + (o.required ? ' *' : '') }), input, o.help ? h('p', { id: helpId, class: 'help muted', text: o.help }) : null);
}

/** @param {HTMLFormElement} form @param {string} name */
export function val(form, name) {
  const el = /** @type {HTMLInputElement | null} */ (form.elements.namedItem(name));
  return el ? el.value : '';
}

/** Marks a form dirty on the first edit. @param {HTMLFormElement} form @param {SpaceContext} ctx */
export function trackDirty(form, ctx) {
  form.addEventListener('input', () => ctx.setFormDirty(true));
}
