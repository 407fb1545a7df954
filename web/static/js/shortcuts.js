// Keyboard shortcuts that reach the page on every system: "g" then a
// space's letter (as GitHub does; the letters come from the route
// registry), "/" to the space's search, "?" for the list of shortcuts, and
// Ctrl+. for the dock. Ctrl/⌘+digit is not used: browsers keep those keys
// for their tabs. Keys typed into a field are never taken.

import { h, uid } from './dom.js';

/**
 * @typedef {import('./router.js').Registry} Registry
 * @typedef {import('./router.js').Space} Space
 */

/** How long after "g" the second key counts, in milliseconds. */
const SEQUENCE_MS = 1500;

/** @param {EventTarget | null} t */
function typing(t) {
  if (!(t instanceof HTMLElement)) return false;
  return t.isContentEditable || t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT';
}

/** The shortcut of a space as shown: "g m". @param {Space} s */
export function spaceKeys(s) {
  return `g ${s.shortcut}`;
}

export class Shortcuts {
  /**
   * @param {{registry: Registry, go: (s: Space) => void, dockKey: () => void, escape: (target: EventTarget | null) => boolean, focusSearch: () => boolean}} o
   */
  constructor(o) {
    this.o = o;
    this.gAt = -Infinity;
    /** @type {HTMLDialogElement | null} */
    this.dialog = null;
  }

  /** @param {KeyboardEvent} ev */
  onKey(ev) {
    if ((ev.ctrlKey || ev.metaKey) && !ev.altKey && ev.key === '.') {
      ev.preventDefault();
      this.o.dockKey();
      return;
    }
    // Escape closes the dock, unless a dialog or a detail took it first.
    if (ev.key === 'Escape') {
      if (!ev.defaultPrevented && !this.dialog && !document.querySelector('dialog[open]') && this.o.escape(ev.target)) ev.preventDefault();
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing || typing(ev.target) || this.dialog) return;
    const now = performance.now();
    if (now - this.gAt < SEQUENCE_MS) {
      this.gAt = -Infinity;
      const s = this.o.registry.spaces.find((x) => x.shortcut === ev.key.toLowerCase());
      if (s) {
        ev.preventDefault();
        this.o.go(s);
      }
      return;
    }
    if (ev.key === 'g') {
      this.gAt = now;
    } else if (ev.key === '?') {
      ev.preventDefault();
      this.showHelp();
    } else if (ev.key === '/' && this.o.focusSearch()) {
      ev.preventDefault();
    }
  }

  /** The list of shortcuts, as a modal dialog. */
  showHelp() {
    const id = uid('keys');
    /** Each row: the keys typed one after the other, and what they do. @type {[string[], string][]} */
    const rows = [
      ...this.o.registry.spaces.map((s) => /** @type {[string[], string]} */ ([['g', s.shortcut], `Open ${s.title}`])),
      [['/'], 'Search in this space'],
      [['Ctrl+.'], 'Open the operator dock and type in it; from the dock, close it'],
      [['?'], 'Show these shortcuts'],
      [['Esc'], 'Close a dialog, a detail (back to its row) or the dock'],
    ];
    const dlg = h('dialog', { class: 'dialog shortcuts', 'aria-labelledby': id, 'data-shortcuts': '' },
      h('h2', { id, text: 'Keyboard shortcuts' }),
      h('table', { class: 'table keys' },
        h('caption', { class: 'visually-hidden', text: 'Keyboard shortcuts' }),
        h('thead', null, h('tr', null, h('th', { scope: 'col', text: 'Keys' }), h('th', { scope: 'col', text: 'Does' }))),
        h('tbody', null, rows.map(([k, what]) => h('tr', null,
          h('td', null, k.map((key, i) => [i ? ' then ' : '', h('kbd', { text: key })])),
          h('td', { text: what }))))),
      h('p', { class: 'muted small', text: 'Type the keys one after the other, outside a text field.' }),
      h('div', { class: 'actions' }, h('button', { type: 'button', class: 'primary', text: 'Close', onclick: () => dlg.close() })));
    dlg.addEventListener('close', () => {
      dlg.remove();
      this.dialog = null;
    });
    this.dialog = dlg;
    document.body.appendChild(dlg);
    dlg.showModal();
    /** @type {HTMLButtonElement | null} */ (dlg.querySelector('button'))?.focus();
  }
}
