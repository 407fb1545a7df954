// The route registry as served by GET /api/operator/routes, and the URL
// state of each space. The cockpit keeps no second list of destinations: the
// rail, the shortcuts, URL parsing and effect validation all read this.

/**
 * @typedef {{name: string, type: string, values?: string[], pattern?: string, description: string}} Param
 * @typedef {{id: string, title: string, path: string, shortcut: string, description: string, subtitle: string, params: Param[], effects: string[], selection?: string[], form?: string}} Space
 * @typedef {{name: string, type: string, maxLength?: number, description: string}} FormField
 * @typedef {{id: string, space: string, fields: FormField[]}} Form
 * @typedef {{version: number, spaces: Space[], forms: Form[], themes: string[]}} RegistryJSON
 * @typedef {{space: Space, params: Record<string, string>}} Route
 */

export class Registry {
  /** @param {RegistryJSON} json */
  constructor(json) {
    if (!json || !Array.isArray(json.spaces) || json.spaces.length === 0) throw new Error('the route registry has no spaces');
    this.version = json.version;
    this.spaces = json.spaces;
    this.forms = json.forms || [];
    this.themes = json.themes || [];
  }
  /** @param {string} id */
  space(id) { return this.spaces.find((s) => s.id === id); }
  /** @param {string} path */
  spaceAt(path) { return this.spaces.find((s) => s.path === path); }
  /** @param {string} id */
  form(id) { return this.forms.find((f) => f.id === id); }
}

/**
 * The URL form of a param value, as the server's routes.paramString.
 * @param {unknown} v
 */
export function paramString(v) {
  if (Array.isArray(v)) return v.map(String).join(',');
  if (typeof v === 'number') return String(Math.trunc(v));
  return String(v);
}

/**
 * Checks one param value as the registry types it (the server's
 * routes.Param.check); returns a reason, or null when valid.
 * @param {Param} p
 * @param {unknown} v
 * @returns {string | null}
 */
export function checkParam(p, v) {
  switch (p.type) {
    case 'string':
      return typeof v === 'string' && v !== '' && new TextEncoder().encode(v).length <= 200 ? null : `${p.name} must be a non-empty string of at most 200 bytes`;
    case 'id':
      return typeof v === 'string' && new RegExp(p.pattern || '^$').test(v) ? null : `${p.name} must be an id or a name`;
    case 'enum':
      return typeof v === 'string' && (p.values || []).includes(v) ? null : `${p.name} must be one of ${(p.values || []).join(', ')}`;
    case 'boolean':
      return typeof v === 'boolean' ? null : `${p.name} must be true or false`;
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v) ? null : `${p.name} must be an integer`;
    case 'list':
      return Array.isArray(v) && v.every((x) => typeof x === 'string') ? null : `${p.name} must be a list of strings`;
  }
  return `${p.name} has a type this cockpit does not know (${p.type})`;
}

/**
 * Checks a URL query value (a string) for a param; null when valid.
 * @param {Param} p @param {string} v
 */
export function checkQueryValue(p, v) {
  switch (p.type) {
    case 'boolean':
      return v === 'true' || v === 'false' ? null : 'not a boolean';
    case 'integer':
      return /^-?\d+$/.test(v) ? null : 'not an integer';
    case 'list':
      return null;
  }
  return checkParam(p, v);
}

/**
 * The space and valid params of a location. Unknown paths are null; unknown
 * or invalid params are dropped (and reported).
 * @param {Registry} reg
 * @param {string} pathname
 * @param {string} search
 * @returns {{route: Route, dropped: string[]} | null}
 */
export function parseRoute(reg, pathname, search) {
  const space = reg.spaceAt(pathname);
  if (!space) return null;
  const q = new URLSearchParams(search);
  /** @type {Record<string, string>} */
  const params = {};
  /** @type {string[]} */
  const dropped = [];
  for (const [k, v] of q) {
    const p = space.params.find((x) => x.name === k);
    if (!p || checkQueryValue(p, v) !== null) {
      dropped.push(k);
      continue;
    }
    params[k] = v;
  }
  return { route: { space, params }, dropped };
}

/**
 * The path and query of a space with params (in the given order).
 * @param {Space} space
 * @param {Record<string, unknown>} params
 */
export function routeOf(space, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    q.set(k, paramString(v));
  }
  const s = q.toString();
  return space.path + (s ? '?' + s : '');
}
