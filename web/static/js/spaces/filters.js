// Filters bound to URL params: selects, the search box, and the bar that
// folds them on a phone's width.

import { h, uid } from '../dom.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext */

/** The allowed values of a space's enum param, from the registry. @param {SpaceContext} ctx @param {string} name */
export function paramValues(ctx, name) {
  const p = ctx.route.space.params.find((x) => x.name === name);
  return (p && p.values) || [];
}

/**
 * A labelled select bound to a URL param ('' = all).
 * @param {SpaceContext} ctx @param {string} param @param {string} label @param {string[]} values @param {string} [allLabel]
 */
export function selectFilter(ctx, param, label, values, allLabel = 'All') {
  const id = uid('f');
  const sel = h('select', {
    id, name: param,
    onchange: () => ctx.setParams({ [param]: sel.value || null }, { replace: true }),
  }, h('option', { value: '', text: allLabel }), values.map((v) => h('option', { value: v, text: v, selected: ctx.route.params[param] === v })));
  return h('div', { class: 'field inline' }, h('label', { for: id, text: label }), sel);
}

/**
 * A filter bar: the search and the actions always show; the other filters
 * fold behind a Filters button on a phone's width (wider, the button hides
 * and they all show), the button saying how many are set.
 * @param {{fields: (Node | null)[], search?: Node | null, actions?: (Node | null)[], active: number}} o
 */
export function filterBar(o) {
  const id = uid('filters');
  const toggle = h('button', {
    type: 'button', class: 'filters-toggle', 'data-needs': 'read', 'aria-controls': id, 'aria-expanded': 'false',
    text: o.active ? `Filters (${o.active} set)` : 'Filters',
    onclick: () => {
      const open = bar.classList.toggle('filters-open');
      toggle.setAttribute('aria-expanded', String(open));
    },
  });
  const bar = h('div', { class: 'filters', role: 'search' }, toggle, h('div', { class: 'filter-fields', id }, o.fields), o.search || null, o.actions || []);
  return bar;
}

/**
 * A search box bound to the q param (debounced, replaces history).
 * @param {SpaceContext} ctx @param {string} label
 */
export function searchBox(ctx, label) {
  const id = uid('q');
  /** @type {any} */
  let t = null;
  const input = h('input', {
    id, type: 'search', name: 'q', value: ctx.route.params.q || '', placeholder: label, autocomplete: 'off',
    oninput: () => {
      clearTimeout(t);
      t = setTimeout(() => {
        ctx.setParams({ q: input.value.trim() || null }, { replace: true });
        const again = /** @type {HTMLInputElement | null} */ (document.getElementById('search-' + ctx.route.space.id));
        if (again) {
          again.focus();
          again.setSelectionRange(again.value.length, again.value.length);
        }
      }, 300);
    },
  });
  input.id = 'search-' + ctx.route.space.id;
  return h('div', { class: 'field inline grow' }, h('label', { for: input.id, class: 'visually-hidden', text: label }), input);
}
