// Tabs bound to a URL param, in the ARIA tabs pattern.

import { h } from '../dom.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext */

/** @param {string} param @param {string} value */
const tabId = (param, value) => `tab-${param}-${value}`;

/**
 * Tabs bound to a URL param (the ARIA tabs pattern: arrow keys, Home and
 * End move between tabs; the selected one is the only tab stop).
 * @param {SpaceContext} ctx @param {string} param @param {{value: string, label: string}[]} tabs @param {string} current
 * @param {(value: string) => Record<string, string | null | undefined>} [extra] params to reset when switching
 */
export function tabs(ctx, param, tabs, current, extra) {
  const pick = (/** @type {string} */ value, /** @type {boolean} */ focus) => {
    ctx.setParams({ [param]: value, ...(extra ? extra(value) : {}) });
    if (focus) document.getElementById(tabId(param, value))?.focus();
  };
  return h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Views' }, tabs.map((t) => h('button', {
    type: 'button', role: 'tab', class: 'tab', id: tabId(param, t.value), 'aria-controls': `panel-${param}`,
    'aria-selected': String(t.value === current), tabindex: t.value === current ? '0' : '-1',
    text: t.label,
    onclick: () => pick(t.value, false),
    onkeydown: (/** @type {KeyboardEvent} */ ev) => {
      const i = tabs.findIndex((x) => x.value === current);
      const to = { ArrowRight: i + 1, ArrowLeft: i - 1 + tabs.length, Home: 0, End: tabs.length - 1 }[ev.key];
      if (to === undefined) return;
      ev.preventDefault();
      pick(tabs[to % tabs.length].value, true);
    },
  })));
}

/** The panel the tabs of a param control. @param {string} param @param {string} current */
export function tabPanel(param, current) {
  return h('div', { role: 'tabpanel', id: `panel-${param}`, 'aria-labelledby': tabId(param, current) });
}
