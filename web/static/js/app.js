// The cockpit shell: the rail built from the route registry, URL state per
// space, mounting the six spaces, the dock beside them, and the context the
// dock sends. Works with the dock closed and with no model at all: every
// space talks to /api/app directly. Sign-in, theme, shortcuts, dialogs and
// effect application live in their own modules.

import { Api, ApiError } from './api.js';
import { AppApi } from './appapi.js';
import { OperatorClient } from './operator-api.js';
import { takeTokenFromFragment, getToken, clearToken } from './auth.js';
import { Registry, routeOf } from './router.js';
import { RouteState } from './route-state.js';
import { h, replace, icon } from './dom.js';
import { showSignIn, showFatal } from './signin.js';
import { storedTheme, applyTheme, currentTheme } from './theme.js';
import { Shortcuts, spaceKeys } from './shortcuts.js';
import { applyEffect } from './apply-effect.js';
import { confirmDialog } from './dialogs.js';
import { may } from './roles.js';
import { errorBox } from './spaces/loading.js';
import { guardControls } from './spaces/guard.js';
import { Dock } from './dock/dock.js';
import { isSheet } from './dock/sheet.js';
import { AppEvents, coalesce } from './live.js';
import { Inbox } from './inbox.js';
import * as mission from './spaces/mission.js';
import * as designer from './spaces/designer.js';
import * as library from './spaces/library.js';
import * as historySpace from './spaces/history.js';
import * as schedules from './spaces/schedules.js';
import * as system from './spaces/system.js';

/**
 * @typedef {import('./router.js').Route} Route
 * @typedef {import('./router.js').Space} Space
 * @typedef {import('./frames.js').Effect} Effect
 * @typedef {import('./frames.js').ContextSnapshot} ContextSnapshot
 * @typedef {import('./route-state.js').Prefill} Prefill
 * @typedef {{mount: (el: HTMLElement, ctx: SpaceContext) => (void | (() => void))}} SpaceModule
 * @typedef {object} SpaceContext
 * @property {AppApi} app
 * @property {Route} route
 * @property {Cockpit} cockpit
 * @property {(patch: Record<string, string | null | undefined>, opts?: {replace?: boolean}) => void} setParams
 * @property {(form: string) => Prefill | null} takePrefill
 * @property {(dirty: boolean) => void} setFormDirty
 * @property {() => boolean} formDirty whether the shown view has edits that are not saved
 * @property {() => boolean} isCurrent whether this mount still shows
 * @property {(types: string[], fn: (events: import('./live.js').ChangeEvent[]) => void) => void} onChange calls fn
 *   (coalesced, with the burst's events) after application changes of these types (live.js), while this
 *   mount shows; a "reset" (missed changes) calls it too
 * @typedef {import('./roles.js').Me} Me
 */

/** @type {Record<string, SpaceModule>} */
const SPACES = { mission, designer, library, history: historySpace, schedules, system };

/** @type {Record<string, string>} */
const ICONS = {
  mission: 'M3 13h8V3H3v10zm0 8h8v-6H3v6zm10 0h8V11h-8v10zm0-18v6h8V3h-8z',
  designer: 'M4 6h10v2H4zm0 5h16v2H4zm0 5h10v2H4zm14-2 4 3-4 3z',
  library: 'M4 4h4v16H4zm6 0h4v16h-4zm6.5 1 3.9 1-3.6 15-3.9-1z',
  // A clock with a turning-back arrow: never a crescent like the theme's.
  history: 'M13 3a9 9 0 0 0-9 9H1l4 4 4-4H6a7 7 0 1 1 2.05 4.95l-1.42 1.42A9 9 0 1 0 13 3zm-1 5v5.4l4.3 2.6.8-1.3-3.6-2.1V8z',
  schedules: 'M7 2h2v2h6V2h2v2h3v18H4V4h3zm-1 8v10h12V10zm2 2h3v3H8z',
  system: 'M12 8a4 4 0 1 0 0 8 4 4 0 0 0 0-8zm9 5v-2l-2.3-.6-.7-1.7 1.2-2-1.4-1.4-2 1.2-1.7-.7L13.5 3h-2l-.6 2.3-1.7.7-2-1.2-1.4 1.4 1.2 2-.7 1.7L3 11v2l2.3.6.7 1.7-1.2 2 1.4 1.4 2-1.2 1.7.7.6 2.3h2l.6-2.3 1.7-.7 2 1.2 1.4-1.4-1.2-2 .7-1.7z',
};

export class Cockpit {
  /** @param {HTMLElement} root */
  constructor(root) {
    this.root = root;
    this.api = new Api({ getToken, onAuthError: () => this.signOut('The daemon refused the token (it may have been rotated). Paste the current one.') });
    this.app = new AppApi(this.api);
    this.operator = new OperatorClient(this.api);
    /** @type {RouteState | null} where the cockpit is, once the route registry is loaded */
    this.nav = null;
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
    /** @type {Inbox | null} the approvals waiting for the signed-in person */
    this.inbox = null;
    /** The live application changes every view listens to. */
    this.live = new AppEvents(this.api);
    /** @type {(() => void)[]} the current mount's change subscriptions */
    this.mountSubs = [];
    /** @type {Shortcuts | null} */
    this.shortcuts = null;
    /** @type {Me | null} who is signed in (GET /api/auth/whoami) */
    this.me = null;
    /** @type {Element | null} where focus was before Ctrl+. took it into the dock */
    this.beforeDock = null;
    this.listening = false;
    applyTheme(storedTheme());
  }

  /** @returns {Registry | null} the route registry the daemon serves */
  get registry() { return this.nav && this.nav.registry; }

  /** @returns {Route | null} the route the shown view is at */
  get route() { return this.nav && this.nav.route; }

  /** @param {string} theme */
  applyTheme(theme) { applyTheme(theme); }

  get theme() { return currentTheme(); }

  async start() {
    if (!this.listening) {
      this.listening = true;
      // A #token= link opened in this tab (after a refused token, say)
      // changes only the fragment: sign in with it, no reload needed.
      addEventListener('hashchange', () => {
        if (takeTokenFromFragment()) this.start();
        else if (this.registry) this.openFromFragment();
      });
      // Back and Forward over unsaved edits ask first: the address is put
      // back while the question is open.
      addEventListener('popstate', () => {
        if (!this.nav) return;
        if (!this.nav.formDirty) return this.onRoute();
        const to = this.clientRoute();
        history.pushState(null, '', this.nav.shown);
        this.go(to);
      });
      // A reload or a closed tab over unsaved edits: the browser asks.
      addEventListener('beforeunload', (ev) => {
        if (!this.nav || !this.nav.formDirty) return;
        ev.preventDefault();
        ev.returnValue = '';
      });
      addEventListener('keydown', (ev) => this.shortcuts && this.shortcuts.onKey(ev));
      // Each stream holds a connection, and a browser allows six per host
      // over HTTP/1.1 for all its tabs: a page that is left gives its
      // streams back (one restored from the back/forward cache loads
      // anew), and a hidden tab its change stream (resumed from its cursor
      // when it shows again, so the views catch up).
      addEventListener('pagehide', () => {
        this.live.stop();
        if (this.dock) this.dock.stop();
      });
      addEventListener('pageshow', (ev) => { if (ev.persisted) location.reload(); });
      document.addEventListener('visibilitychange', () => {
        if (!this.registry) return;
        if (document.hidden) this.live.stop();
        else this.live.start();
      });
    }
    takeTokenFromFragment();
    const proxied = getToken() ? null : await this.proxyIdentity();
    if (!getToken() && !proxied) return showSignIn(this.root);
    try {
      const [routes, me] = await Promise.all([this.operator.routes(), proxied || this.api.get('/api/auth/whoami')]);
      this.nav = new RouteState(new Registry(routes));
      this.me = me;
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return; // signOut already showed the form
      return showFatal(this.root, 'The cockpit could not load its route registry', e);
    }
    const reg = this.nav.registry;
    this.shortcuts = new Shortcuts({
      registry: reg,
      go: (s) => {
        this.go(s.path);
        this.main && this.main.focus({ preventScroll: true });
      },
      dockKey: () => this.dockKey(),
      escape: (t) => this.escape(t),
      focusSearch: () => {
        const s = /** @type {HTMLInputElement | null} */ (this.main && this.main.querySelector('input[type=search]'));
        if (s) s.focus();
        return !!s;
      },
    });
    this.renderShell();
    this.openFromFragment();
    this.live.start();
    if (this.inbox) this.inbox.start();
    this.onRoute();
  }

  /**
   * Who a sign-in proxy in front of the daemon says this is (its session
   * cookie reaches it; the daemon answers whoami without a token), or null:
   * then a token is asked for. Quietly: a 401 here is no refused token.
   * @returns {Promise<Me | null>}
   */
  async proxyIdentity() {
    try {
      const res = await this.api.fetchImpl(this.api.baseUrl + '/api/auth/whoami', { headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' });
      return res.ok ? await res.json() : null;
    } catch {
      return null;
    }
  }

  /** @param {string} [message] */
  signOut(message) {
    clearToken();
    this.me = null;
    this.live.stop();
    if (this.dock) this.dock.stop();
    showSignIn(this.root, message);
  }

  /**
   * Whether the signed-in principal may do an action (roles.js), with the
   * reason when not.
   * @param {keyof typeof import('./roles.js').ACTION_ROLES} action
   */
  may(action) { return may(this.me, action); }

  /** Who is signed in, in the top bar: name, role and Sign out. */
  identity() {
    const me = this.me;
    if (!me) return null;
    return h('div', { class: 'identity', 'data-identity': '' },
      h('span', { class: 'identity-name', title: `Signed in as ${me.name}, role ${me.role}` },
        icon('M12 12a4 4 0 1 0 0-8 4 4 0 0 0 0 8zm0 2c-4 0-8 2-8 5v1h16v-1c0-3-4-5-8-5z'),
        h('span', { class: 'visually-hidden', text: 'Signed in as ' }),
        h('strong', { 'data-me': '', text: me.name }), ' ',
        h('span', { class: 'role-badge', 'data-role': me.role, text: me.role })),
      h('button', { type: 'button', class: 'link small', 'data-action': 'sign-out', text: 'Sign out', onclick: () => this.signOut('Signed out. Paste a token to sign in again.') }));
  }

  renderShell() {
    const reg = /** @type {Registry} */ (this.registry);
    if (this.dock) this.dock.stop();
    this.railLinks = new Map();
    const nav = h('nav', { class: 'rail', 'aria-label': 'Spaces' },
      h('div', { class: 'brand' }, h('span', { class: 'brand-mark', 'aria-hidden': 'true', text: 'S' }), h('span', { text: 'Studio' })),
      h('ul', null, reg.spaces.map((s) => {
        const a = h('a', {
          href: s.path, class: 'rail-link', 'data-space': s.id,
          title: `${s.title}: ${s.subtitle} (${spaceKeys(s).replace(' ', ' then ')})`,
          onclick: (/** @type {MouseEvent} */ ev) => {
            if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
            ev.preventDefault();
            this.go(s.path);
          },
        }, icon(ICONS[s.id] || ICONS.mission), h('span', { class: 'rail-title', text: s.title }), h('kbd', { class: 'rail-key', 'aria-hidden': 'true', text: spaceKeys(s) }));
        this.railLinks.set(s.id, a);
        return h('li', null, a);
      })),
      h('button', { type: 'button', class: 'link rail-help', text: 'Shortcuts (?)', onclick: () => this.shortcuts && this.shortcuts.showHelp() }));
    this.main = h('main', { class: 'space', id: 'space', tabindex: '-1', 'aria-labelledby': 'space-title' });
    this.notice = h('div', { class: 'notices', role: 'status', 'aria-live': 'polite' });
    const dockRoot = h('aside', { class: 'dock', id: 'dock', 'aria-label': 'Operator dock' });
    this.dockToggle = h('button', {
      type: 'button', class: 'dock-toggle', 'aria-controls': 'dock', 'aria-expanded': 'false', 'aria-keyshortcuts': 'Control+.',
      title: 'Open the operator dock (Ctrl+.)', onclick: () => this.toggleDock(),
    }, icon('M4 4h16v12H7l-3 3zm3 4v2h10V8zm0 4v2h7v-2z'), h('span', { text: 'Operator' }));
    const themeBtn = h('button', {
      type: 'button', class: 'icon-button', title: 'Switch light/dark theme', 'aria-label': 'Switch light or dark theme',
      onclick: () => this.applyTheme(this.theme === 'dark' ? 'light' : 'dark'),
    }, icon('M12 3a9 9 0 1 0 9 9A7 7 0 0 1 12 3z'));
    this.inbox = new Inbox(this);
    const header = h('header', { class: 'topbar' }, h('div', { class: 'crumb', id: 'crumb' }), h('div', { class: 'topbar-actions' }, this.inbox.button, this.identity(), themeBtn, this.dockToggle));
    this.root.removeAttribute('aria-busy');
    replace(this.root, h('a', { href: '#space', class: 'skip-link', text: 'Skip to content' }), nav, h('div', { class: 'workspace' }, header, this.notice, this.main), dockRoot);
    this.dock = new Dock(dockRoot, this);
    let open = false;
    try { open = localStorage.getItem('studio.dock') === 'open'; } catch { /* no storage */ }
    this.setDockOpen(open);
  }

  toggleDock() { this.setDockOpen(!this.root.classList.contains('dock-open')); }

  /** Opens the approvals inbox: what waits for the signed-in person's decision. */
  openInbox() { if (this.inbox) this.inbox.open(); }

  /**
   * Opens the dock on the conversation (and proposal) a link's fragment
   * names, #conversation=ID&proposal=ID: what webhook messages and MCP
   * clients' cockpitUrl link to.
   * The fragment is removed, as the token's is.
   */
  openFromFragment() {
    const params = new URLSearchParams(location.hash.startsWith('#') ? location.hash.slice(1) : '');
    // #inbox: what waits for the person (a link in a message or a bookmark).
    if (params.has('inbox')) {
      params.delete('inbox');
      const rest = params.toString();
      history.replaceState(history.state, '', location.pathname + location.search + (rest ? '#' + rest : ''));
      this.openInbox();
    }
    const conv = params.get('conversation');
    if (!conv) return;
    const prop = params.get('proposal') || undefined;
    params.delete('conversation');
    params.delete('proposal');
    const rest = params.toString();
    history.replaceState(history.state, '', location.pathname + location.search + (rest ? '#' + rest : ''));
    this.openConversation(conv, prop).catch((e) => this.flash(`Could not open conversation ${conv}: ${e instanceof Error ? e.message : String(e)}`, 'error'));
  }

  /**
   * Ctrl+.: opens the dock and moves focus into it; from inside the dock,
   * closes it and gives focus back.
   */
  dockKey() {
    const inDock = !!this.dock && this.dock.root.contains(document.activeElement);
    if (inDock && this.root.classList.contains('dock-open')) {
      this.closeDock();
      return;
    }
    this.beforeDock = document.activeElement;
    if (!this.root.classList.contains('dock-open')) this.setDockOpen(true);
    else if (this.dock) this.dock.sheet.setMinimised(false);
    if (this.dock) this.dock.focus();
  }

  /** Closes the dock; focus goes back where it was, else to the dock's toggle. */
  closeDock() {
    const back = this.beforeDock;
    this.beforeDock = null;
    this.setDockOpen(false);
    if (back instanceof HTMLElement && back.isConnected && back !== document.body && !(this.dock && this.dock.root.contains(back))) back.focus();
    else if (this.dockToggle) this.dockToggle.focus();
  }

  /**
   * Escape outside a dialog and a detail: closes the dock when focus is in
   * it, or is not in a field of the page. Returns whether it did.
   * @param {EventTarget | null} target
   */
  escape(target) {
    if (!this.root.classList.contains('dock-open') || !this.dock) return false;
    const inDock = target instanceof Node && this.dock.root.contains(target);
    const typing = target instanceof HTMLElement && (target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName));
    if (!inDock && typing) return false;
    this.closeDock();
    return true;
  }

  /**
   * Opens the dock on a conversation (from an audit row), with a proposal
   * of it in view when given.
   * @param {string} conversationId @param {string} [proposalId]
   */
  async openConversation(conversationId, proposalId) {
    // show remembers the conversation first, so opening the dock starts on it.
    const shown = this.dock ? this.dock.show(conversationId, proposalId) : Promise.resolve();
    this.setDockOpen(true);
    await shown;
  }

  /** @param {boolean} open */
  setDockOpen(open) {
    this.root.classList.toggle('dock-open', open);
    if (this.dockToggle) this.dockToggle.setAttribute('aria-expanded', String(open));
    try { localStorage.setItem('studio.dock', open ? 'open' : 'closed'); } catch { /* no storage */ }
    if (this.dock) {
      this.dock.sheet.setMinimised(false);
      if (open) this.dock.open();
      else this.dock.hide();
    }
  }

  /**
   * Moves to a route: pushes the URL (replace for small refinements) and shows it.
   * @param {string} path path and query
   * @param {{replace?: boolean, force?: boolean}} [opts] force: leave unsaved edits without asking
   */
  go(path, opts = {}) {
    // Unsaved edits are never dropped silently: leaving them is asked.
    if (this.nav && this.nav.formDirty && !opts.force) {
      this.confirmLeave().then((ok) => { if (ok) this.go(path, { ...opts, force: true }); });
      return;
    }
    if (path !== location.pathname + location.search) {
      if (opts.replace) history.replaceState(null, '', path);
      else history.pushState(null, '', path);
    }
    this.onRoute();
  }

  /**
   * Asks whether to leave a form with unsaved edits; yes drops them.
   * @returns {Promise<boolean>}
   */
  async confirmLeave() {
    const leave = await confirmDialog({
      title: 'Leave without saving?',
      body: 'You have edits on this page that are not saved. Leaving drops them; stay to save them first.',
      confirm: 'Leave and drop my edits', cancel: 'Stay', danger: true,
    });
    if (leave && this.nav) this.nav.formDirty = false;
    return leave;
  }

  /** @param {Record<string, string | null | undefined>} patch @param {{replace?: boolean}} [opts] */
  setParams(patch, opts = {}) {
    const to = this.nav && this.nav.patched(patch);
    if (to !== null) this.go(to, opts);
  }

  /**
   * Writes what the view resolved into the address, without showing it
   * again: a short run id becomes the full one, and its row is marked.
   * @param {Record<string, string>} patch
   */
  canonicalize(patch) {
    const nav = this.nav;
    const to = nav && nav.canonicalize(patch);
    if (!nav || to === null) return;
    history.replaceState(history.state, '', to);
    nav.shown = this.clientRoute();
    for (const v of Object.values(patch)) {
      const row = this.main && this.main.querySelector(`tr[data-key="${CSS.escape(v)}"]`);
      if (row) row.classList.add('selected');
    }
    if (this.dock) this.dock.onContextChange();
  }

  /** The current route as a client route string. */
  clientRoute() { return location.pathname + location.search; }

  /** @returns {void} */
  onRoute() {
    const nav = /** @type {RouteState} */ (this.nav);
    const parsed = nav.enter(location.pathname, location.search);
    if (!parsed) return this.notFound();
    if (parsed.dropped.length) {
      // Keep the address bar honest: show only what the view applies.
      history.replaceState(null, '', routeOf(parsed.route.space, parsed.route.params));
      this.flash(`Ignored unknown or invalid URL parameters: ${parsed.dropped.join(', ')}`);
    }
    nav.shown = this.clientRoute();
    for (const [id, a] of this.railLinks) {
      if (id === parsed.route.space.id) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    const crumb = document.getElementById('crumb');
    const sp = parsed.route.space;
    // The subtitle is written for people; the description is the model's.
    if (crumb) replace(crumb, h('h1', { id: 'space-title', text: sp.title }), h('span', { class: 'muted subtitle', text: sp.subtitle }));
    document.title = `${sp.title} · Studio`;
    this.mount();
    if (this.dock) this.dock.onContextChange();
  }

  /** The cockpit's own page for an address it has no space at. */
  notFound() {
    if (typeof this.cleanup === 'function') this.cleanup();
    this.cleanup = undefined;
    this.mountSeq++;
    const nav = /** @type {RouteState} */ (this.nav);
    const reg = nav.registry;
    nav.lose();
    for (const a of this.railLinks.values()) a.removeAttribute('aria-current');
    const crumb = document.getElementById('crumb');
    if (crumb) replace(crumb, h('h1', { id: 'space-title', text: 'Page not found' }));
    document.title = 'Page not found · Studio';
    if (!this.main) return;
    replace(this.main, h('div', { class: 'space-body not-found', 'data-not-found': '' },
      h('p', null, 'The cockpit has no page at ', h('code', { text: location.pathname }), '. It may be a mistyped or an old link.'),
      h('p', { text: 'Go to one of its spaces:' }),
      h('ul', { class: 'list' }, reg.spaces.map((s) => h('li', null,
        h('a', { href: s.path, onclick: (/** @type {MouseEvent} */ ev) => { ev.preventDefault(); this.go(s.path); } }, h('strong', { text: s.title })), ' — ', s.subtitle)))));
  }

  mount() {
    const nav = this.nav;
    if (!this.main || !nav || !nav.route) return;
    if (typeof this.cleanup === 'function') this.cleanup();
    for (const unsub of this.mountSubs.splice(0)) unsub();
    const seq = ++this.mountSeq;
    const route = nav.route;
    const el = h('div', { class: 'space-body', 'data-space': route.space.id });
    replace(this.main, el);
    /** @type {SpaceContext} */
    const ctx = {
      app: this.app,
      route,
      cockpit: this,
      setParams: (patch, opts) => this.setParams(patch, opts),
      // this.nav, not nav: a sign-in again starts a new RouteState.
      takePrefill: (form) => (this.nav ? this.nav.takePrefill(form) : null),
      setFormDirty: (d) => { if (seq === this.mountSeq && this.nav) this.nav.formDirty = d; },
      formDirty: () => !!this.nav && this.nav.formDirty,
      isCurrent: () => seq === this.mountSeq,
      onChange: (types, fn) => {
        /** @type {import('./live.js').ChangeEvent[]} */
        let burst = [];
        const later = coalesce(() => {
          const events = burst;
          burst = [];
          if (seq === this.mountSeq) fn(events);
        }, 250);
        this.mountSubs.push(later.cancel, this.live.subscribe((e) => {
          if (seq === this.mountSeq && (e.type === 'reset' || types.includes(e.type))) {
            burst.push(e);
            later();
          }
        }));
      },
    };
    const mod = SPACES[route.space.id];
    if (!mod) {
      replace(el, h('p', { text: `This cockpit has no view for space ${route.space.id} yet.` }));
      return;
    }
    nav.formDirty = false;
    try {
      this.cleanup = mod.mount(el, ctx);
    } catch (e) {
      replace(el, errorBox(e));
    }
    // Controls the signed-in principal may not use are held as the space
    // renders them (guardControls asks may(), the one decision).
    if (this.me) {
      const me = this.me;
      const guard = () => guardControls(el, me);
      guard();
      const watch = new MutationObserver(guard);
      watch.observe(el, { childList: true, subtree: true });
      const inner = this.cleanup;
      this.cleanup = () => { watch.disconnect(); if (typeof inner === 'function') inner(); };
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

  /** The current context snapshot for a turn (route-state.js). @returns {ContextSnapshot} */
  contextSnapshot() { return /** @type {RouteState} */ (this.nav).snapshot(this.clientRoute()); }

  /**
   * Validates and applies one effect; see apply-effect.js. On a phone the
   * dock's sheet then steps aside, so the person sees what changed.
   * @param {Effect} e
   */
  async applyEffect(e) {
    const out = await applyEffect(this, e);
    if (out.status === 'applied' && e.kind !== 'theme' && this.dock && this.root.classList.contains('dock-open') && isSheet()) this.dock.sheet.setMinimised(true);
    return out;
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
