// Building blocks shared by the spaces: tabs, filters bound to URL params,
// tables with keyboard-selectable rows, labelled form fields, run detail.

import { h, replace, uid, badge } from '../dom.js';
import { fmtTime, fmtRelative } from '../time.js';
import { routeOf } from '../router.js';
import { ApiError, errorText } from '../api.js';
import { may, ACTION_ROLES } from '../roles.js';
import { errorSentence } from '../words.js';

export { errorText };

/**
 * @typedef {import('../app.js').SpaceContext} SpaceContext
 * @typedef {import('../appapi.js').Run} Run
 */

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

/**
 * The route of the current space with some params changed: the href of a
 * link that selects an item.
 * @param {SpaceContext} ctx @param {Record<string, string | null>} patch
 */
export function selectHref(ctx, patch) {
  /** @type {Record<string, string>} */
  const params = { ...ctx.route.params };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete params[k];
    else params[k] = v;
  }
  return routeOf(ctx.route.space, params);
}

/**
 * A link inside the cockpit: a real href (open in a new tab, copy), and a
 * plain click moves without a reload.
 * @param {SpaceContext} ctx @param {string} href @param {...any} children
 */
export function linkTo(ctx, href, ...children) {
  return h('a', {
    href,
    onclick: (/** @type {MouseEvent} */ ev) => {
      if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
      ev.preventDefault();
      ev.stopPropagation();
      ctx.cockpit.go(href);
    },
  }, ...children);
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

/**
 * @template T
 * @typedef {{label: string, cell: (row: T) => any, class?: string, link?: boolean}} Column
 */

/**
 * Where focus goes after the next render: a detail the person just opened
 * (it renders after the space remounts and loads it), or the row whose
 * detail they just closed. Set by a row's selection and a detail's Escape
 * or Close; taken once by the next detail or table that renders.
 */
const focusNext = { detail: false, row: '' };

/**
 * Shows a detail the person just selected where their eye is: focused,
 * and scrolled into the content region's view (never the shell's).
 * A detail shown on a page load or a live refresh leaves focus alone.
 * @param {HTMLElement} el
 */
export function revealDetail(el) {
  if (!focusNext.detail) return;
  focusNext.detail = false;
  if (!el.hasAttribute('tabindex')) el.setAttribute('tabindex', '-1');
  el.focus({ preventScroll: true });
  el.scrollIntoView({ block: 'nearest' });
}

/**
 * Closes a detail and gives focus back to its row in the list.
 * @param {SpaceContext} ctx @param {string} param the URL param of the selection @param {string} key the row's key
 */
export function closeDetail(ctx, param, key) {
  focusNext.row = key;
  ctx.setParams({ [param]: null });
}

/**
 * The keys of a detail panel: Escape closes it and returns to its row.
 * @param {HTMLElement} el @param {SpaceContext} ctx @param {string} param @param {string} key
 */
export function detailKeys(el, ctx, param, key) {
  if (!el.hasAttribute('tabindex')) el.setAttribute('tabindex', '-1');
  el.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Escape' || ev.defaultPrevented) return;
    // Escape in a field of the detail's own forms does not drop what was typed.
    const t = ev.target;
    if (t instanceof HTMLElement && t !== el && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT')) return;
    ev.preventDefault();
    ev.stopPropagation();
    closeDetail(ctx, param, key);
  });
}

/**
 * Keeps a visible cue on a table that scrolls sideways: data-scroll says
 * which sides have more ("left", "right", or both).
 * @param {HTMLElement} frame the cue's box @param {HTMLElement} wrap the scrolling box
 */
function scrollCue(frame, wrap) {
  const update = () => {
    const more = [];
    if (wrap.scrollLeft > 1) more.push('left');
    if (wrap.scrollLeft + wrap.clientWidth < wrap.scrollWidth - 1) more.push('right');
    if (more.length) frame.dataset.scroll = more.join(' ');
    else delete frame.dataset.scroll;
  };
  wrap.addEventListener('scroll', update, { passive: true });
  if (typeof ResizeObserver === 'function') new ResizeObserver(update).observe(wrap);
  requestAnimationFrame(update);
}

/**
 * A table whose rows select an item. The column marked link holds a real
 * link to the selection (the keyboard's way in); a click anywhere on the
 * row selects too.
 * @template T
 * @param {{caption: string, columns: Column<T>[], rows: T[], key: (row: T) => string, alias?: (row: T) => string, selected?: string, onSelect?: (row: T) => void, href?: (row: T) => string, empty?: string | Node, compact?: boolean}} o
 * alias: another name a row is selected by in the address (a name where the key is an id).
 * compact: narrow, a row is a two-line card of its cells (a list to scan: the fleet, the audit) instead of one line per cell.
 */
export function table(o) {
  if (o.rows.length === 0) return h('div', { class: 'empty muted' }, o.empty || 'Nothing here yet.');
  const linkCol = o.href ? Math.max(0, o.columns.findIndex((c) => c.link)) : -1;
  const select = (/** @type {T} */ row) => {
    focusNext.detail = true;
    o.onSelect && o.onSelect(row);
  };
  /** @type {HTMLAnchorElement | null} */
  let refocus = null;
  // Narrow, each row is a card: the cells carry their column's label.
  const wrap = h('div', { class: 'table-wrap' }, h('table', { class: ['table', 'responsive', o.compact ? 'compact-cards' : ''] },
    h('caption', { class: 'visually-hidden', text: o.caption }),
    h('thead', null, h('tr', null, o.columns.map((c) => h('th', { scope: 'col', class: c.class, text: c.label })))),
    h('tbody', null, o.rows.map((row) => {
      const k = o.key(row);
      const sel = o.selected !== undefined && (o.selected === k || (!!o.alias && o.alias(row) === o.selected));
      return h('tr', {
        class: sel ? 'selected' : '', 'data-key': k,
        onclick: o.onSelect ? (/** @type {MouseEvent} */ ev) => {
          if (ev.target instanceof Element && ev.target.closest('a, button, input, label')) return;
          select(row);
        } : undefined,
      }, o.columns.map((c, i) => {
        const content = c.cell(row);
        if (i !== linkCol || !o.href) return h('td', { class: c.class, 'data-label': c.label }, content);
        const href = o.href(row);
        const a = h('a', {
          href, class: 'row-link', 'aria-current': sel ? 'true' : undefined,
          onclick: (/** @type {MouseEvent} */ ev) => {
            if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
            ev.preventDefault();
            select(row);
          },
        }, content);
        if (focusNext.row && focusNext.row === k) refocus = /** @type {HTMLAnchorElement} */ (a);
        return h('td', { class: c.class, 'data-label': c.label }, a);
      }));
    }))));
  const frame = scrollFrame(wrap);
  if (refocus) {
    focusNext.row = '';
    const a = /** @type {HTMLAnchorElement} */ (refocus);
    // The table is put in the page right after it is built.
    requestAnimationFrame(() => {
      if (!a.isConnected) return;
      a.focus({ preventScroll: true });
      a.scrollIntoView({ block: 'nearest' });
    });
  }
  return frame;
}

/**
 * A scrolling table's frame with its sideways cue, as table() builds it,
 * for tables built by hand.
 * @param {HTMLElement} wrap the scrolling box (.table-wrap)
 */
export function scrollFrame(wrap) {
  const frame = h('div', { class: 'table-frame' }, wrap, h('p', { class: 'scroll-cue muted small', 'aria-hidden': 'true', text: 'Scroll sideways for more →' }));
  scrollCue(frame, wrap);
  return frame;
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

/** @param {string} id */
export function shortId(id) {
  return h('code', { class: 'id', title: id, text: id.slice(0, 8) });
}

/** A run status line for tables. @param {Run} r */
export function runCells(r) {
  return { status: badge(r.status), when: h('time', { datetime: new Date(r.createdAt * 1000).toISOString(), title: fmtTime(r.createdAt), text: fmtRelative(r.createdAt) }) };
}

/**
 * The controls of a space that change something need a permission (an
 * action of roles.js, asked through may(): the one place the cockpit
 * decides): an element marked data-needs="ACTION" needs that one; a
 * space's primary, danger and submit buttons and its data-action buttons
 * need "change" unless marked otherwise (data-needs="read"). Those the
 * signed-in principal may not use are disabled, their reason in the
 * tooltip, in the accessible description and in a note at the top of the
 * space: never a control that only fails.
 * @param {HTMLElement} root @param {import('../roles.js').Me | null} me
 * @returns {number} how many controls are held
 */
export function guardControls(root, me) {
  if (!me) return 0;
  let held = 0;
  /** @type {Set<string>} */
  const reasons = new Set();
  const noteId = 'read-only-note';
  root.querySelectorAll('[data-needs], button.primary, button.danger, button[type=submit], button[data-action]').forEach((node) => {
    const el = /** @type {HTMLButtonElement | HTMLInputElement | HTMLSelectElement} */ (node);
    const action = /** @type {keyof typeof ACTION_ROLES} */ (el.dataset.needs || 'change');
    const v = may(me, action in ACTION_ROLES ? action : 'change');
    if (v.allowed) return;
    held++;
    reasons.add(v.reason);
    if (el.dataset.held) return;
    el.dataset.held = action;
    el.disabled = true;
    el.title = v.reason;
    const described = (el.getAttribute('aria-describedby') || '').split(' ').filter(Boolean);
    if (!described.includes(noteId)) el.setAttribute('aria-describedby', [...described, noteId].join(' '));
  });
  let note = /** @type {HTMLElement | null} */ (root.querySelector(':scope > [data-read-only]'));
  if (held && !note) {
    note = h('p', { class: 'read-only-note', id: noteId, 'data-read-only': '', role: 'note',
      text: `You are signed in as ${me.name} (${me.role}): you can look here. The greyed-out controls are held: ${[...reasons].join(' ')} An admin can change your role.` });
    root.prepend(note);
  }
  return held;
}

/**
 * Re-renders a live region in place: the scroll positions (of the region,
 * its scrolling ancestors, the page and its table's horizontal scroll) and
 * the focused row stay as they were, so an update a change brought in
 * never moves the reader.
 * @param {HTMLElement} region @param {() => void} render
 */
export function keepPlace(region, render) {
  const active = document.activeElement;
  const inside = active instanceof HTMLElement && region.contains(active) ? active : null;
  const row = inside ? inside.closest('[data-key]') : null;
  const key = row ? row.getAttribute('data-key') : null;
  // Focus outside a row (a detail's button, a tab): found again by what it is.
  const again = inside && !row ? focusKey(inside) : null;
  /** @type {[Element, number, number][]} */
  const scrolled = [];
  for (let n = /** @type {Element | null} */ (region); n; n = n.parentElement) if (n.scrollTop || n.scrollLeft) scrolled.push([n, n.scrollTop, n.scrollLeft]);
  const wrap = region.querySelector('.table-wrap');
  const wrapLeft = wrap ? wrap.scrollLeft : 0;
  const wx = scrollX, wy = scrollY;
  render();
  for (const [n, top, left] of scrolled) { n.scrollTop = top; n.scrollLeft = left; }
  const newWrap = region.querySelector('.table-wrap');
  if (newWrap) newWrap.scrollLeft = wrapLeft;
  if (scrollX !== wx || scrollY !== wy) scrollTo(wx, wy);
  if (key !== null) {
    const back = region.querySelector(`[data-key="${CSS.escape(key)}"]`);
    const target = back && /** @type {HTMLElement | null} */ (back.querySelector('a, button, input'));
    if (target) target.focus({ preventScroll: true });
  } else if (again && !region.contains(document.activeElement)) {
    const target = /** @type {HTMLElement | null} */ (region.querySelector(again));
    if (target) target.focus({ preventScroll: true });
  }
}

/**
 * A selector that finds an element again after its region is rebuilt:
 * its id, its data-action, its name, or its tag and text.
 * @param {HTMLElement} el
 * @returns {string | null}
 */
function focusKey(el) {
  if (el.id) return `#${CSS.escape(el.id)}`;
  if (el.dataset.action) return `[data-action="${CSS.escape(el.dataset.action)}"]`;
  const name = el.getAttribute('name');
  if (name) return `${el.tagName.toLowerCase()}[name="${CSS.escape(name)}"]`;
  return null;
}
