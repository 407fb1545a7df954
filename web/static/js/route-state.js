// Where the cockpit is: the route the shown view is at, whether the address
// has no space, the unsaved-edits mark, a prefill waiting for its form, and
// the context snapshot a turn sends. No DOM and no history: the shell
// (app.js) reads the address, moves it, and tells this what it showed.

import { parseRoute, routeOf } from './router.js';

/**
 * @typedef {import('./router.js').Registry} Registry
 * @typedef {import('./router.js').Route} Route
 * @typedef {import('./frames.js').ContextSnapshot} ContextSnapshot
 * @typedef {{form: string, values: Record<string, any>}} Prefill
 */

export class RouteState {
  /** @param {Registry} registry */
  constructor(registry) {
    this.registry = registry;
    /** @type {Route | null} the route the shown view is at */
    this.route = null;
    /** whether the address has no space (the not-found page shows) */
    this.lost = false;
    /** the address the shown view is at (Back over unsaved edits returns to it) */
    this.shown = '/';
    /** whether the mounted view has edits that are not saved */
    this.formDirty = false;
    /** @type {Prefill | null} a prefill effect's values, waiting for its form to mount */
    this.prefill = null;
  }

  /**
   * Shows the space at an address: the route becomes current and unsaved
   * edits of another space are dropped. Null when no space is there (the
   * state is unchanged; call lose()).
   * @param {string} pathname @param {string} search
   * @returns {{route: Route, dropped: string[]} | null} dropped: the unknown or invalid params left out
   */
  enter(pathname, search) {
    const parsed = parseRoute(this.registry, pathname, search);
    if (!parsed) return null;
    const prev = this.route;
    this.route = parsed.route;
    this.lost = false;
    if (prev && prev.space.id !== parsed.route.space.id) this.formDirty = false;
    return parsed;
  }

  /**
   * The address has no space: effects and the dock's context start from the
   * first space's home, the page the not-found view offers first.
   */
  lose() {
    this.route = { space: this.registry.spaces[0], params: {} };
    this.lost = true;
  }

  /**
   * The address of the current route with params changed (null, undefined
   * or '' removes one), or null before any route.
   * @param {Record<string, string | null | undefined>} patch
   */
  patched(patch) {
    if (!this.route) return null;
    const params = { ...this.route.params };
    for (const [k, v] of Object.entries(patch)) {
      if (v === null || v === undefined || v === '') delete params[k];
      else params[k] = v;
    }
    return routeOf(this.route.space, params);
  }

  /**
   * Writes what the view resolved into the current route in place (the
   * mounted view's ctx.route is this object: its tables mark the selection
   * by it) and returns the address to show, or null before any route.
   * @param {Record<string, string>} patch
   */
  canonicalize(patch) {
    if (!this.route) return null;
    Object.assign(this.route.params, patch);
    return routeOf(this.route.space, this.route.params);
  }

  /**
   * The waiting prefill when it is for this form, taken once.
   * @param {string} form
   */
  takePrefill(form) {
    const p = this.prefill;
    if (!p || p.form !== form) return null;
    this.prefill = null;
    return p;
  }

  /**
   * The context snapshot of a turn (docs/design.md §5): the space, the
   * address (the space's home when the address has none), the params that
   * select an item apart from the filters.
   * @param {string} address the browser's path and query
   * @returns {ContextSnapshot}
   */
  snapshot(address) {
    const route = /** @type {Route} */ (this.route);
    /** @type {Record<string, string>} */
    const selection = {};
    /** @type {Record<string, string>} */
    const filters = {};
    for (const [k, v] of Object.entries(route.params)) {
      if ((route.space.selection || []).includes(k)) selection[k] = v;
      else filters[k] = v;
    }
    /** @type {ContextSnapshot} */
    const snap = { space: route.space.id, route: this.lost ? route.space.path : address, filters };
    if (Object.keys(selection).length) snap.selection = selection;
    return snap;
  }
}
