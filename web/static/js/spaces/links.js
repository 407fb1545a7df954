// Links inside the cockpit: real hrefs to a selection, moved to without a
// reload.

import { h } from '../dom.js';
import { routeOf } from '../router.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext */

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
