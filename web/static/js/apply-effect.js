// Applying a validated ui_command to the cockpit (docs/design.md §8): navigate,
// select (only an item that exists), prefill (never over unsaved edits)
// and theme. Never throws: a failure is a rejection with a stable code,
// which the dock records and acknowledges.

import { ApiError } from './api.js';
import { validateEffect, targetRoute } from './effects.js';

/**
 * @typedef {import('./app.js').Cockpit} Cockpit
 * @typedef {import('./appapi.js').AppApi} AppApi
 * @typedef {import('./frames.js').Effect} Effect
 * @typedef {import('./router.js').Route} Route
 * @typedef {import('./route-state.js').RouteState} RouteState
 * @typedef {import('./dock/effect-runner.js').EffectOutcome} EffectOutcome
 */

/**
 * Whether the item a select effect names exists and can be shown.
 * @param {AppApi} app @param {Effect} e
 */
export async function selectionVisible(app, e) {
  const sel = e.selection || {};
  try {
    for (const [k, v] of Object.entries(sel)) {
      if (k === 'run') await app.getRun(v);
      else if (k === 'playbook') await app.getPlaybook(v);
      else if (k === 'workflow') await app.getWorkflow(v);
      else if (k === 'schedule') await app.getSchedule(v);
      else if (k === 'event') {
        const page = await app.audit({ limit: 200 });
        if (!page.events.some((x) => String(x.id) === v)) return false;
      }
    }
  } catch (err) {
    if (err instanceof ApiError && (err.status === 404 || err.code === 'not_found' || err.code === 'validation')) return false;
    throw err;
  }
  return true;
}

/**
 * Validates and applies one effect.
 * @param {Cockpit} c @param {Effect} e
 * @returns {Promise<EffectOutcome>}
 */
export async function applyEffect(c, e) {
  const nav = /** @type {RouteState} */ (c.nav);
  const reg = nav.registry;
  const refusal = validateEffect(reg, e);
  if (refusal) return { status: 'rejected', rejectionCode: refusal.code, reason: refusal.reason };
  try {
    const route = /** @type {Route} */ (nav.route);
    const current = { space: route.space.id, params: route.params };
    switch (e.kind) {
      case 'theme':
        c.applyTheme(String(e.theme));
        if (c.theme !== e.theme) return { status: 'rejected', rejectionCode: 'client_error', reason: 'the theme did not change' };
        return { status: 'applied', clientRoute: c.clientRoute() };
      case 'navigate':
      case 'select':
        // Moving the page would drop a person's unsaved edits.
        if (nav.formDirty) {
          return { status: 'rejected', rejectionCode: 'stale_context', reason: 'a form with unsaved edits is open; moving the page would drop them' };
        }
        if (e.kind === 'navigate') break;
        if (!(await selectionVisible(c.app, e))) {
          return { status: 'rejected', rejectionCode: 'not_visible', reason: `the ${Object.keys(e.selection || {}).join(', ')} to select does not exist or cannot be shown` };
        }
        break;
      case 'prefill':
        if (nav.formDirty) {
          return { status: 'rejected', rejectionCode: 'stale_context', reason: 'a form with unsaved edits is open; the prefill would overwrite them' };
        }
        nav.prefill = { form: String(e.form), values: { ...(e.values || {}) } };
        break;
    }
    const target = /** @type {string} */ (targetRoute(reg, e, current));
    if (e.kind === 'prefill' && target === c.clientRoute()) c.mount();
    else c.go(target);
    if (e.kind === 'prefill' && nav.prefill) {
      nav.prefill = null;
      return { status: 'rejected', rejectionCode: 'client_error', reason: 'the form did not open' };
    }
    return { status: 'applied', clientRoute: c.clientRoute() };
  } catch (err) {
    return { status: 'rejected', rejectionCode: 'client_error', reason: err instanceof Error ? err.message : String(err) };
  }
}
