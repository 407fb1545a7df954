// The cockpit shell: sign-in, the rail built from the route registry,
// Ctrl/⌘+1..6, URL state per space, the six spaces, theme, dialogs, and the
// effect applier the dock calls. Works with the dock closed and with no
// model at all: every space talks to /api/app directly.

import { Api, ApiError } from './api.js';
import { AppApi } from './appapi.js';
import { OperatorClient } from './protocol.js';
import { takeTokenFromFragment, getToken, setToken, clearToken } from './auth.js';
import { Registry, parseRoute, routeOf } from './router.js';
import { validateEffect, targetRoute } from './effects.js';
import { h, replace, icon, uid } from './dom.js';
import { errorBox } from './spaces/common.js';
import { Dock } from './dock.js';
import * as mission from './spaces/mission.js';
import * as designer from './spaces/designer.js';
import * as library from './spaces/library.js';
import * as historySpace from './spaces/history.js';
import * as schedules from './spaces/schedules.js';
import * as system from './spaces/system.js';

/**
 * @typedef {import('./router.js').Route} Route
 * @typedef {import('./protocol.js').Effect} Effect
 * @typedef {{status: 'applied', clientRoute: string} | {status: 'rejected', rejectionCode: import('./effects.js').RejectionCode, reason: string}} EffectOutcome
 * @typedef {{form: string, values: Record<string, any>}} Prefill
 * @typedef {{mount: (el: HTMLElement, ctx: SpaceContext) => (void | (() => void))}} SpaceModule
 * @typedef {object} SpaceContext
 * @property {AppApi} app
 * @property {Route} route
 * @property {Cockpit} cockpit
 * @property {(patch: Record<string, string | null | undefined>, opts?: {replace?: boolean}) => void} setParams
 * @property {(form: string) => Prefill | null} takePrefill
 * @property {(dirty: boolean) => void} setFormDirty
 * @property {() => boolean} isCurrent whether this mount still shows
 */

/** @type {Record<string, SpaceModule>} */
const SPACES = { mission, designer, library, history: historySpace, schedules, system };

const ICONS = {
  mission: 'M3 13h8V3H3v10zm0 8h8v-6H3v6zm10 0h8V11h-8v10zm0-18v6h8V3h-8z',
  designer: 'M4 6h10v2H4zm0 5h16v2H4zm0 5h10v2H4zm14-2 4 3-4 3z',
  library: 'M4 4h4v16H4zm6 0h4v16h-4zm6.5 1 3.9 1-3.6 15-3.9-1z',
  history: 'M13 3a9 9 0 1 0 8.5 12h-2.2A7 7 0 1 1 13 5v3l4-4-4-4v3zm-1 5h2v5l4 2-1 1.7-5-2.7z',
  schedules: 'M7 2h2v2h6V2h2v2h3v18H4V4h3zm-1 8v10h12V10zm2 2h3v3H8z',
  system: 'M12 8a4 4 0 1 0 0 8 4 4 0 0 0 0-8zm9 5v-2l-2.3-.6-.7-1.7 1.2-2-1.4-1.4-2 1.2-1.7-.7L13.5 3h-2l-.6 2.3-1.7.7-2-1.2-1.4 1.4 1.2 2-.7 1.7L3 11v2l2.3.6.7 1.7-1.2 2 1.4 1.4 2-1.2 1.7.7.6 2.3h2l.6-2.3 1.7-.7 2 1.2 1.4-1.4-1.2-2 .7-1.7z',
};

const THEME_KEY = 'studio.theme';

export class Cockpit {
  /** @param {HTMLElement} root */
  constructor(root) {
    this.root = root;
    this.api = new Api({ getToken, onAuthError: () => this.signOut('The daemon refused the token (it may have been rotated). Paste the current one.') });
    this.app = new AppApi(this.api);
    this.operator = new OperatorClient(this.api);
    /** @type {Registry | null} */
    this.registry = null;
    /** @type {Route | null} */
    this.route = null;
    /** @type {Prefill | null} */
    this.pendingPrefill = null;
    this.formDirty = false;
    this.mountSeq = 0;
    /** @type {Map<string, HTMLAnchorElement>} */
    this.railLinks = new Map();
    /** @type {HTMLElement | null} */
    this.main = null;
    /** @type {HTMLElement | null} */
    this.notice = null;
    /** @type {HTMLButtonElement | null} */
    this.dockToggle = null;
    /** @type {(() => void) | void} */
    this.cleanup = undefined;
    /** @type {Dock | null} */
    this.dock = null;
    this.applyTheme(this.storedTheme());
  }

  storedTheme() {
    try {
      const t = localStorage.getItem(THEME_KEY);
      if (t === 'light' || t === 'dark') return t;
    } catch { /* no storage */ }
    return matchMedia && matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
  }

  /** @param {string} theme */
  applyTheme(theme) {
    document.documentElement.dataset.theme = theme;
    try { localStorage.setItem(THEME_KEY, theme); } catch { /* no storage */ }
    document.dispatchEvent(new CustomEvent('studio:theme', { detail: theme }));
  }

  get theme() { return document.documentElement.dataset.theme || 'light'; }

  async start() {
    takeTokenFromFragment();
    if (!getToken()) return this.showSignIn();
    try {
      this.registry = new Registry(await this.operator.routes());
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return; // signOut already showed the form
      return this.showFatal('The cockpit could not load its route registry', e);
    }
    this.renderShell();
    addEventListener('popstate', () => this.onRoute());
    addEventListener('keydown', (ev) => this.onKey(ev));
    this.onRoute();
  }

  /** @param {string} [message] */
  signOut(message) {
    clearToken();
    if (this.dock) this.dock.stop();
    this.showSignIn(message);
  }

  /** @param {string} [message] */
  showSignIn(message) {
    this.root.removeAttribute('aria-busy');
    const inputId = uid('token');
    const err = h('p', { class: 'form-error', role: 'alert', text: message || '' });
    const input = h('input', { id: inputId, type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': inputId + '-help' });
    const form = h('form', {
      class: 'signin card', 'aria-labelledby': 'signin-title',
      onsubmit: async (/** @type {Event} */ ev) => {
        ev.preventDefault();
        const t = input.value.trim();
        if (!t) return;
        setToken(t);
        location.reload();
      },
    },
    h('h1', { id: 'signin-title', text: 'Sign in to Studio' }),
    h('p', { text: 'This page needs the daemon\'s token. Open the link that `studio serve` printed (it carries the token after #), or paste the token here. `studio token` prints it.' }),
    h('label', { for: inputId, text: 'Token' }),
    input,
    h('p', { id: inputId + '-help', class: 'muted', text: 'Kept in this tab\'s session storage only; sent only in the Authorization header.' }),
    err,
    h('button', { type: 'submit', class: 'primary', text: 'Sign in' }));
    replace(this.root, h('main', { class: 'signin-page' }, form));
    input.focus();
  }

  /** @param {string} title @param {unknown} e */
  showFatal(title, e) {
    this.root.removeAttribute('aria-busy');
    replace(this.root, h('main', { class: 'signin-page' }, h('div', { class: 'card', role: 'alert' },
      h('h1', { text: title }),
      h('p', { text: e instanceof Error ? e.message : String(e) }),
      h('button', { type: 'button', onclick: () => location.reload(), text: 'Try again' }))));
  }

  renderShell() {
    const reg = /** @type {Registry} */ (this.registry);
    const isMac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);
    const nav = h('nav', { class: 'rail', 'aria-label': 'Spaces' },
      h('div', { class: 'brand' }, h('span', { class: 'brand-mark', 'aria-hidden': 'true', text: 'S' }), h('span', { text: 'Studio' })),
      h('ul', null, reg.spaces.map((s) => {
        const a = h('a', {
          href: s.path, class: 'rail-link', 'data-space': s.id,
          title: `${s.title}: ${s.description} (${isMac ? '⌘' : 'Ctrl'}+${s.shortcut})`,
          'aria-keyshortcuts': `${isMac ? 'Meta' : 'Control'}+${s.shortcut}`,
          onclick: (/** @type {MouseEvent} */ ev) => {
            if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
            ev.preventDefault();
            this.go(s.path);
          },
        }, icon(ICONS[/** @type {keyof ICONS} */ (s.id)] || ICONS.mission), h('span', { class: 'rail-title', text: s.title }), h('kbd', { class: 'rail-key', text: (isMac ? '⌘' : 'Ctrl+') + s.shortcut }));
        this.railLinks.set(s.id, a);
        return h('li', null, a);
      })));
    this.main = h('main', { class: 'space', id: 'space', tabindex: '-1' });
    this.notice = h('div', { class: 'notices', role: 'status', 'aria-live': 'polite' });
    const dockRoot = h('aside', { class: 'dock', id: 'dock', 'aria-label': 'Operator dock' });
    this.dockToggle = h('button', {
      type: 'button', class: 'dock-toggle', 'aria-controls': 'dock', 'aria-expanded': 'false',
      title: 'Open the operator dock (Ctrl+.)', onclick: () => this.toggleDock(),
    }, icon('M4 4h16v12H7l-3 3zm3 4v2h10V8zm0 4v2h7v-2z'), h('span', { text: 'Operator' }));
    const themeBtn = h('button', {
      type: 'button', class: 'icon-button', title: 'Switch light/dark theme', 'aria-label': 'Switch light or dark theme',
      onclick: () => this.applyTheme(this.theme === 'dark' ? 'light' : 'dark'),
    }, icon('M12 3a9 9 0 1 0 9 9A7 7 0 0 1 12 3z'));
    const header = h('header', { class: 'topbar' }, h('div', { class: 'crumb', id: 'crumb' }), h('div', { class: 'topbar-actions' }, themeBtn, this.dockToggle));
    this.root.removeAttribute('aria-busy');
    replace(this.root, h('a', { href: '#space', class: 'skip-link', text: 'Skip to content' }), nav, h('div', { class: 'workspace' }, header, this.notice, this.main), dockRoot);
    this.dock = new Dock(dockRoot, this);
    let open = false;
    try { open = localStorage.getItem('studio.dock') === 'open'; } catch { /* no storage */ }
    this.setDockOpen(open);
  }

  toggleDock() { this.setDockOpen(!this.root.classList.contains('dock-open')); }

  /** @param {boolean} open */
  setDockOpen(open) {
    this.root.classList.toggle('dock-open', open);
    if (this.dockToggle) this.dockToggle.setAttribute('aria-expanded', String(open));
    try { localStorage.setItem('studio.dock', open ? 'open' : 'closed'); } catch { /* no storage */ }
    if (this.dock) {
      if (open) this.dock.open();
      else this.dock.hide();
    }
  }

  /** @param {KeyboardEvent} ev */
  onKey(ev) {
    if (!this.registry) return;
    const mod = ev.ctrlKey || ev.metaKey;
    if (mod && !ev.altKey && !ev.shiftKey && /^[1-9]$/.test(ev.key)) {
      const s = this.registry.spaces.find((x) => x.shortcut === ev.key);
      if (s) {
        ev.preventDefault();
        this.go(s.path);
        this.main && this.main.focus({ preventScroll: true });
      }
    } else if (mod && ev.key === '.') {
      ev.preventDefault();
      this.toggleDock();
    }
  }

  /**
   * Moves to a route: pushes the URL (replace for small refinements) and shows it.
   * @param {string} path path and query
   * @param {{replace?: boolean}} [opts]
   */
  go(path, opts = {}) {
    if (path !== location.pathname + location.search) {
      if (opts.replace) history.replaceState(null, '', path);
      else history.pushState(null, '', path);
    }
    this.onRoute();
  }

  /** @param {Record<string, string | null | undefined>} patch @param {{replace?: boolean}} [opts] */
  setParams(patch, opts = {}) {
    if (!this.route) return;
    const params = { ...this.route.params };
    for (const [k, v] of Object.entries(patch)) {
      if (v === null || v === undefined || v === '') delete params[k];
      else params[k] = v;
    }
    this.go(routeOf(this.route.space, params), opts);
  }

  /** The current route as a client route string. */
  clientRoute() { return location.pathname + location.search; }

  onRoute() {
    const reg = /** @type {Registry} */ (this.registry);
    const parsed = parseRoute(reg, location.pathname, location.search);
    if (!parsed) {
      history.replaceState(null, '', '/');
      return this.onRoute();
    }
    if (parsed.dropped.length) {
      // Keep the address bar honest: show only what the view applies.
      history.replaceState(null, '', routeOf(parsed.route.space, parsed.route.params));
      this.flash(`Ignored unknown or invalid URL parameters: ${parsed.dropped.join(', ')}`);
    }
    const prev = this.route;
    this.route = parsed.route;
    for (const [id, a] of this.railLinks || []) {
      if (id === parsed.route.space.id) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    const crumb = document.getElementById('crumb');
    if (crumb) replace(crumb, h('h1', { text: parsed.route.space.title }), h('span', { class: 'muted', text: parsed.route.space.description }));
    document.title = `${parsed.route.space.title} · Studio`;
    if (prev && prev.space.id !== parsed.route.space.id) this.formDirty = false;
    this.mount();
    if (this.dock) this.dock.onContextChange();
  }

  mount() {
    if (!this.main || !this.route) return;
    if (typeof this.cleanup === 'function') this.cleanup();
    const seq = ++this.mountSeq;
    const route = this.route;
    const el = h('div', { class: 'space-body', 'data-space': route.space.id });
    replace(this.main, el);
    /** @type {SpaceContext} */
    const ctx = {
      app: this.app,
      route,
      cockpit: this,
      setParams: (patch, opts) => this.setParams(patch, opts),
      takePrefill: (form) => {
        const p = this.pendingPrefill;
        if (p && p.form === form) {
          this.pendingPrefill = null;
          return p;
        }
        return null;
      },
      setFormDirty: (d) => { if (seq === this.mountSeq) this.formDirty = d; },
      isCurrent: () => seq === this.mountSeq,
    };
    const mod = SPACES[route.space.id];
    if (!mod) {
      replace(el, h('p', { text: `This cockpit has no view for space ${route.space.id} yet.` }));
      return;
    }
    this.formDirty = false;
    try {
      this.cleanup = mod.mount(el, ctx);
    } catch (e) {
      replace(el, errorBox(e));
    }
  }

  /** A short, polite status message. @param {string} text @param {'info'|'error'} [kind] */
  flash(text, kind = 'info') {
    if (!this.notice) return;
    const n = h('div', { class: ['notice', 'notice-' + kind] }, h('span', { text }),
      h('button', { type: 'button', class: 'link', 'aria-label': 'Dismiss', text: '×', onclick: () => n.remove() }));
    this.notice.appendChild(n);
    setTimeout(() => n.remove(), kind === 'error' ? 15000 : 6000);
  }

  /**
   * A modal confirmation (a <dialog>; Escape cancels).
   * @param {{title: string, body: string, confirm: string, danger?: boolean}} o
   * @returns {Promise<boolean>}
   */
  confirmDialog(o) {
    return new Promise((resolve) => {
      const titleId = uid('dlg');
      const dlg = h('dialog', { class: 'dialog', 'aria-labelledby': titleId },
        h('form', { method: 'dialog' },
          h('h2', { id: titleId, text: o.title }),
          h('p', { text: o.body }),
          h('div', { class: 'actions' },
            h('button', { value: 'cancel', type: 'button', text: 'Cancel', onclick: () => dlg.close('cancel') }),
            h('button', { value: 'ok', type: 'submit', class: o.danger ? 'danger' : 'primary', text: o.confirm }))));
      dlg.addEventListener('close', () => {
        resolve(dlg.returnValue === 'ok');
        dlg.remove();
      });
      document.body.appendChild(dlg);
      dlg.showModal();
      /** @type {HTMLButtonElement | null} */ (dlg.querySelector('button[value=cancel]'))?.focus();
    });
  }

  // --- effects (ADR D5) --------------------------------------------------

  /** The current context snapshot for a turn (ADR D6). */
  contextSnapshot() {
    const route = /** @type {Route} */ (this.route);
    /** @type {Record<string, string>} */
    const selection = {};
    /** @type {Record<string, string>} */
    const filters = {};
    for (const [k, v] of Object.entries(route.params)) {
      if ((route.space.selection || []).includes(k)) selection[k] = v;
      else filters[k] = v;
    }
    /** @type {import('./protocol.js').ContextSnapshot} */
    const snap = { space: route.space.id, route: this.clientRoute(), filters };
    if (Object.keys(selection).length) snap.selection = selection;
    return snap;
  }

  /**
   * Whether the item a select effect names exists and can be shown.
   * @param {Effect} e
   */
  async selectionVisible(e) {
    const sel = e.selection || {};
    try {
      for (const [k, v] of Object.entries(sel)) {
        if (k === 'run') await this.app.getRun(v);
        else if (k === 'playbook') await this.app.getPlaybook(v);
        else if (k === 'workflow') await this.app.getWorkflow(v);
        else if (k === 'schedule') await this.app.getSchedule(v);
        else if (k === 'event') {
          const page = await this.app.audit({ limit: 200 });
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
   * Validates and applies one effect. Never throws: failures are rejections
   * with a stable code. The caller records and acknowledges the outcome.
   * @param {Effect} e
   * @returns {Promise<EffectOutcome>}
   */
  async applyEffect(e) {
    const reg = /** @type {Registry} */ (this.registry);
    const refusal = validateEffect(reg, e);
    if (refusal) return { status: 'rejected', rejectionCode: refusal.code, reason: refusal.reason };
    try {
      const current = { space: /** @type {Route} */ (this.route).space.id, params: /** @type {Route} */ (this.route).params };
      switch (e.kind) {
        case 'theme':
          this.applyTheme(String(e.theme));
          if (this.theme !== e.theme) return { status: 'rejected', rejectionCode: 'client_error', reason: 'the theme did not change' };
          return { status: 'applied', clientRoute: this.clientRoute() };
        case 'select':
          if (!(await this.selectionVisible(e))) {
            return { status: 'rejected', rejectionCode: 'not_visible', reason: `the ${Object.keys(e.selection || {}).join(', ')} to select does not exist or cannot be shown` };
          }
          break;
        case 'prefill':
          if (this.formDirty) {
            return { status: 'rejected', rejectionCode: 'stale_context', reason: 'a form with unsaved edits is open; the prefill would overwrite them' };
          }
          this.pendingPrefill = { form: String(e.form), values: { ...(e.values || {}) } };
          break;
      }
      const target = /** @type {string} */ (targetRoute(reg, e, current));
      if (e.kind === 'prefill' && target === this.clientRoute()) this.mount();
      else this.go(target);
      if (e.kind === 'prefill' && this.pendingPrefill) {
        this.pendingPrefill = null;
        return { status: 'rejected', rejectionCode: 'client_error', reason: 'the form did not open' };
      }
      return { status: 'applied', clientRoute: this.clientRoute() };
    } catch (err) {
      return { status: 'rejected', rejectionCode: 'client_error', reason: err instanceof Error ? err.message : String(err) };
    }
  }
}

/** @param {HTMLElement} root */
export function startApp(root) {
  const c = new Cockpit(root);
  // Exposed for debugging and for the browser tests' read-only checks.
  /** @type {any} */ (window).studio = c;
  c.start();
  return c;
}
