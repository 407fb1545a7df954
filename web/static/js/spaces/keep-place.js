// Re-rendering a live region without moving the reader.

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
