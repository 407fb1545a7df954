// Building blocks shared by the spaces: tabs, filters bound to URL params,
// tables with keyboard-selectable rows, labelled form fields, run detail.

import { h, replace, uid, badge, fmtTime, fmtRelative, fmtDuration } from '../dom.js';
import { ApiError } from '../api.js';

/**
 * @typedef {import('../app.js').SpaceContext} SpaceContext
 * @typedef {import('../appapi.js').Run} Run
 */

/** @param {string} [text] */
export function loading(text = 'Loading…') {
  return h('p', { class: 'loading muted', role: 'status', text });
}

/** An error panel with the code. @param {unknown} e */
export function errorBox(e) {
  const code = e instanceof ApiError ? e.code : 'client_error';
  const msg = e instanceof Error ? e.message : String(e);
  return h('div', { class: 'error-box', role: 'alert' }, h('strong', { class: 'code', text: code }), h('span', { text: ' ' + msg }));
}

/**
 * Loads data into a container, showing progress and errors.
 * @template T
 * @param {HTMLElement} el
 * @param {() => Promise<T>} load
 * @param {(data: T) => Node | Node[]} view
 * @param {SpaceContext} ctx
 */
export async function into(el, load, view, ctx) {
  replace(el, loading());
  try {
    const data = await load();
    if (!ctx.isCurrent()) return;
    replace(el, view(data));
  } catch (e) {
    if (!ctx.isCurrent()) return;
    replace(el, errorBox(e));
  }
}

/** The allowed values of a space's enum param, from the registry. @param {SpaceContext} ctx @param {string} name */
export function paramValues(ctx, name) {
  const p = ctx.route.space.params.find((x) => x.name === name);
  return (p && p.values) || [];
}

/**
 * Tabs bound to a URL param.
 * @param {SpaceContext} ctx @param {string} param @param {{value: string, label: string}[]} tabs @param {string} current
 * @param {(value: string) => Record<string, string | null | undefined>} [extra] params to reset when switching
 */
export function tabs(ctx, param, tabs, current, extra) {
  return h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Views' }, tabs.map((t) => h('button', {
    type: 'button', role: 'tab', class: 'tab', 'aria-selected': String(t.value === current), tabindex: t.value === current ? '0' : '-1',
    text: t.label,
    onclick: () => ctx.setParams({ [param]: t.value, ...(extra ? extra(t.value) : {}) }),
    onkeydown: (/** @type {KeyboardEvent} */ ev) => {
      if (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft') return;
      const i = tabs.findIndex((x) => x.value === current);
      const n = tabs[(i + (ev.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
      ctx.setParams({ [param]: n.value, ...(extra ? extra(n.value) : {}) });
    },
  })));
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

/**
 * A table whose rows select an item (click, Enter or Space).
 * @template T
 * @param {{caption: string, columns: {label: string, cell: (row: T) => any, class?: string}[], rows: T[], key: (row: T) => string, selected?: string, onSelect?: (row: T) => void, empty?: string}} o
 */
export function table(o) {
  if (o.rows.length === 0) return h('p', { class: 'empty muted', text: o.empty || 'Nothing here yet.' });
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table' },
    h('caption', { class: 'visually-hidden', text: o.caption }),
    h('thead', null, h('tr', null, o.columns.map((c) => h('th', { scope: 'col', class: c.class, text: c.label })))),
    h('tbody', null, o.rows.map((row) => {
      const k = o.key(row);
      const sel = o.selected === k;
      const tr = h('tr', {
        class: sel ? 'selected' : '', 'data-key': k, 'aria-selected': o.onSelect ? String(sel) : undefined,
        tabindex: o.onSelect ? '0' : undefined,
        onclick: o.onSelect ? () => o.onSelect && o.onSelect(row) : undefined,
        onkeydown: o.onSelect ? (/** @type {KeyboardEvent} */ ev) => {
          if (ev.key === 'Enter' || ev.key === ' ') {
            ev.preventDefault();
            o.onSelect && o.onSelect(row);
          }
        } : undefined,
      }, o.columns.map((c) => h('td', { class: c.class }, c.cell(row))));
      return tr;
    }))));
}

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

/** @param {unknown} e */
export function errorText(e) {
  if (e instanceof ApiError) {
    const field = e.details && e.details.field ? ` (${e.details.field})` : '';
    return `${e.code}: ${e.message}${field}`;
  }
  return e instanceof Error ? e.message : String(e);
}

/** @param {string} id */
export function shortId(id) {
  return h('code', { class: 'id', title: id, text: id.slice(0, 8) });
}

/**
 * The detail panel of one run, with cancel and retry.
 * @param {SpaceContext} ctx @param {string} id @param {(selected: string | null) => void} [after]
 */
export function runDetail(ctx, id, after) {
  const el = h('section', { class: 'detail card', 'aria-label': 'Run detail' });
  /** @type {any} */
  let poll = null;
  let first = true;
  const load = async () => {
    clearTimeout(poll);
    if (first) replace(el, loading());
    first = false;
    /** @type {Run} */
    let r;
    try {
      r = await ctx.app.getRun(id);
    } catch (e) {
      if (!ctx.isCurrent()) return;
      replace(el, errorBox(e), h('button', { type: 'button', text: 'Close', onclick: () => ctx.setParams({ run: null }) }));
      return;
    }
    if (!ctx.isCurrent()) return;
    // A run in flight is watched until it ends.
    if (r.status === 'queued' || r.status === 'running') poll = setTimeout(() => ctx.isCurrent() && load(), 1500);
    const actions = h('div', { class: 'actions' });
    const status = h('p', { class: 'form-error', role: 'alert' });
    if (r.status === 'queued' || r.status === 'running') {
      actions.appendChild(h('button', {
        type: 'button', class: 'danger', text: 'Cancel run',
        onclick: async () => {
          if (!(await ctx.cockpit.confirmDialog({ title: 'Cancel this run?', body: `The run of ${r.playbookName} stops; its output so far is kept.`, confirm: 'Cancel run', danger: true }))) return;
          try { await ctx.app.cancelRun(r.id); load(); } catch (e) { status.textContent = errorText(e); }
        },
      }));
    }
    if (r.status === 'failed' || r.status === 'cancelled') {
      actions.appendChild(h('button', {
        type: 'button', text: 'Retry run',
        onclick: async () => {
          try {
            const nr = await ctx.app.retryRun(r.id);
            const newId = (nr && (nr.id || (nr.run && nr.run.id))) || null;
            if (after) after(newId);
          } catch (e) { status.textContent = errorText(e); }
        },
      }));
    }
    actions.appendChild(h('button', { type: 'button', class: 'link', text: 'Close', onclick: () => ctx.setParams({ run: null }) }));
    replace(el,
      h('header', { class: 'detail-head' }, h('h2', null, 'Run ', shortId(r.id)), badge(r.status)),
      h('dl', { class: 'facts' },
        h('dt', { text: 'Playbook' }), h('dd', null, h('a', { href: `/library?playbook=${encodeURIComponent(r.playbookId)}`, text: `${r.playbookName} (v${r.playbookVersion})`, onclick: (/** @type {MouseEvent} */ ev) => { ev.preventDefault(); ctx.cockpit.go(`/library?playbook=${encodeURIComponent(r.playbookId)}`); } })),
        h('dt', { text: 'Trigger' }), h('dd', { text: r.trigger }),
        h('dt', { text: 'Created' }), h('dd', { text: `${fmtTime(r.createdAt)} (${fmtRelative(r.createdAt)})` }),
        h('dt', { text: 'Duration' }), h('dd', { text: fmtDuration(r.durationMs) }),
        h('dt', { text: 'Input' }), h('dd', { text: r.input || '—' }),
        Object.keys(r.args || {}).length ? [h('dt', { text: 'Arguments' }), h('dd', null, h('code', { text: JSON.stringify(r.args) }))] : null,
        r.retryOf ? [h('dt', { text: 'Retry of' }), h('dd', null, shortId(r.retryOf))] : null),
      r.error ? h('div', { class: 'error-box', role: 'note' }, h('strong', { class: 'code', text: r.error.code }), h('span', { text: ' ' + r.error.message })) : null,
      h('h3', { text: 'Output' + (r.outputTruncated ? ' (truncated)' : '') }),
      h('pre', { class: 'output', tabindex: '0', 'aria-label': 'Run output', text: r.output || (r.status === 'queued' || r.status === 'running' ? 'No output yet.' : 'No output.') }),
      status, actions);
  };
  load();
  return el;
}

/** A run status line for tables. @param {Run} r */
export function runCells(r) {
  return { status: badge(r.status), when: h('time', { datetime: new Date(r.createdAt * 1000).toISOString(), title: fmtTime(r.createdAt), text: fmtRelative(r.createdAt) }) };
}
