// Effect validation and planning (docs/design.md §8): what the cockpit does
// with a ui_command before it touches anything. Pure functions over the
// route registry, so the same rules run in the browser and in Node tests.
// Applying the plan and acknowledging it is the cockpit's job (app.js).

import { checkParam, routeOf } from './router.js';

/**
 * @typedef {import('./router.js').Registry} Registry
 * @typedef {import('./frames.js').Effect} Effect
 * @typedef {'unsupported'|'invalid_params'|'stale_context'|'not_visible'|'client_error'} RejectionCode
 * @typedef {{code: RejectionCode, reason: string}} Refusal
 */

/**
 * Validates an effect against the registry. Returns a refusal with its
 * rejection code, or null when the registry accepts it.
 * @param {Registry} reg
 * @param {Effect} e
 * @returns {Refusal | null}
 */
export function validateEffect(reg, e) {
  const refuse = (/** @type {RejectionCode} */ code, /** @type {string} */ reason) => ({ code, reason });
  if (!e || typeof e !== 'object') return refuse('invalid_params', 'the effect is not an object');
  switch (e.kind) {
    case 'navigate': {
      const sp = reg.space(String(e.space));
      if (!sp) return refuse('unsupported', `this cockpit has no space "${e.space}"`);
      if (!sp.effects.includes('navigate')) return refuse('unsupported', `space ${sp.id} does not accept navigate`);
      const params = e.params || {};
      if (typeof params !== 'object' || Array.isArray(params)) return refuse('invalid_params', 'params must be an object');
      for (const [name, v] of Object.entries(params)) {
        const p = sp.params.find((x) => x.name === name);
        if (!p) return refuse('invalid_params', `space ${sp.id} has no param "${name}"`);
        const why = checkParam(p, v);
        if (why) return refuse('invalid_params', why);
      }
      return null;
    }
    case 'select': {
      const sp = reg.space(String(e.space));
      if (!sp) return refuse('unsupported', `this cockpit has no space "${e.space}"`);
      if (!sp.effects.includes('select') || !sp.selection || sp.selection.length === 0) return refuse('unsupported', `space ${sp.id} does not accept select`);
      const sel = e.selection || {};
      const keys = Object.keys(sel);
      if (keys.length === 0) return refuse('invalid_params', 'select needs a selection');
      for (const k of keys) {
        if (!sp.selection.includes(k)) return refuse('invalid_params', `space ${sp.id} cannot select "${k}"`);
        const v = sel[k];
        if (typeof v !== 'string' || v === '' || v.length > 200) return refuse('invalid_params', `selection ${k} must be 1 to 200 characters`);
      }
      return null;
    }
    case 'prefill': {
      const f = reg.form(String(e.form));
      if (!f) return refuse('unsupported', `this cockpit has no form "${e.form}"`);
      const sp = reg.space(f.space);
      if (!sp || !sp.effects.includes('prefill')) return refuse('unsupported', `form ${f.id} cannot be prefilled here`);
      const values = e.values || {};
      const names = Object.keys(values);
      if (names.length === 0) return refuse('invalid_params', 'prefill needs at least one value');
      for (const name of names) {
        const field = f.fields.find((x) => x.name === name);
        if (!field) return refuse('invalid_params', `form ${f.id} has no field "${name}"`);
        const v = values[name];
        if (field.type === 'string') {
          if (typeof v !== 'string') return refuse('invalid_params', `${name} must be text`);
          if (field.maxLength && [...v].length > field.maxLength) return refuse('invalid_params', `${name} is longer than ${field.maxLength} characters`);
        } else if (field.type === 'boolean' && typeof v !== 'boolean') {
          return refuse('invalid_params', `${name} must be true or false`);
        }
      }
      return null;
    }
    case 'theme':
      if (!reg.themes.includes(String(e.theme))) return refuse('invalid_params', `theme "${e.theme}" is not one of ${reg.themes.join(', ')}`);
      return null;
  }
  return refuse('unsupported', `this cockpit does not know the effect kind "${e.kind}"`);
}

/**
 * Where an accepted effect leaves the cockpit: the route to push (null for
 * theme, which stays), given the current space and params.
 * @param {Registry} reg
 * @param {Effect} e
 * @param {{space: string, params: Record<string, string>}} current
 * @returns {string | null}
 */
export function targetRoute(reg, e, current) {
  switch (e.kind) {
    case 'navigate': {
      const sp = /** @type {import('./router.js').Space} */ (reg.space(String(e.space)));
      // Exactly the effect's params (the server checks the query equals
      // them), in the registry's order for a readable address.
      const names = sp.params.map((p) => p.name);
      const params = Object.fromEntries(Object.entries(e.params || {}).sort(([a], [b]) => names.indexOf(a) - names.indexOf(b)));
      return routeOf(sp, params);
    }
    case 'select': {
      const sp = /** @type {import('./router.js').Space} */ (reg.space(String(e.space)));
      /** @type {Record<string, string>} */
      const params = {};
      if (current.space === sp.id) Object.assign(params, current.params);
      else if (sp.id === 'mission' && e.selection && e.selection.run) params.view = 'fleet';
      else if (sp.id === 'history' && e.selection) params.tab = e.selection.event ? 'audit' : 'runs';
      // One item is selected at a time per space.
      for (const k of sp.selection || []) delete params[k];
      Object.assign(params, e.selection);
      return routeOf(sp, params);
    }
    case 'prefill': {
      const f = /** @type {import('./router.js').Form} */ (reg.form(String(e.form)));
      const sp = /** @type {import('./router.js').Space} */ (reg.space(f.space));
      return routeOf(sp, current.space === sp.id ? current.params : {});
    }
  }
  return null;
}

/**
 * Whether an effect may still be applied: not past its expiry, and from the
 * newest turn of the conversation. Returns a refusal or null.
 * @param {{expiresAt: number}} payload
 * @param {{nowSeconds: number, superseded: boolean}} ctx
 * @returns {Refusal | null}
 */
export function checkFresh(payload, ctx) {
  if (ctx.superseded) return { code: 'stale_context', reason: 'a newer turn started since this effect was requested' };
  if (payload.expiresAt <= ctx.nowSeconds) return { code: 'stale_context', reason: 'the effect expired before it could be applied' };
  return null;
}
