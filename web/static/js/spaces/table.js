// Tables whose rows select an item, the detail a selection opens, and
// where focus goes between them.

import { h } from '../dom.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext */

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
