// The dock as a sheet on a phone's width: a grip to pull it down to its
// header (so the space above shows what an effect just did) and up again,
// a button doing the same for those who do not drag, and a toggle that
// folds the conversation controls away. On wider screens the dock is a
// side panel and these controls are hidden by the style sheet.

import { h, icon } from '../dom.js';

/** The width below which the dock is a sheet (the style sheet's phone width). */
const PHONE = '(max-width: 640px)';

/** How far a drag must go, in CSS pixels, to minimise or expand the sheet. */
const DRAG_PX = 36;

/** Whether the dock shows as a sheet now. */
export function isSheet() {
  return typeof matchMedia === 'function' && matchMedia(PHONE).matches;
}

export class Sheet {
  /**
   * @param {{app: HTMLElement, dock: HTMLElement, convs: HTMLElement}} o the shell's root (it carries
   * the dock-open and dock-min classes), the dock and its conversation controls
   */
  constructor(o) {
    this.o = o;
    this.dragged = false;
    this.grip = h('button', {
      type: 'button', class: 'dock-grip', 'aria-label': 'Minimise the dock', 'aria-expanded': 'true', 'aria-controls': 'dock',
      onclick: () => {
        if (this.dragged) { this.dragged = false; return; }
        this.setMinimised(!this.minimised);
      },
    });
    this.minBtn = h('button', {
      type: 'button', class: 'icon-button dock-min-toggle', 'aria-label': 'Minimise the dock', title: 'Minimise: watch the page',
      onclick: () => this.setMinimised(!this.minimised),
    }, icon('M7.4 8.6 12 13.2l4.6-4.6L18 10l-6 6-6-6z'));
    if (!o.convs.id) o.convs.id = 'dock-convs';
    this.convsBtn = h('button', {
      type: 'button', class: 'small dock-convs-toggle', 'aria-expanded': 'false', 'aria-controls': o.convs.id, text: 'Chats',
      title: 'Conversations: switch, search, rename, pin; the model',
      onclick: () => this.showConversations(!this.o.dock.classList.contains('convs-open')),
    });
    this.grip.addEventListener('pointerdown', (ev) => this.dragStart(ev));
  }

  get minimised() { return this.o.app.classList.contains('dock-min'); }

  /** @param {boolean} min */
  setMinimised(min) {
    this.o.app.classList.toggle('dock-min', min);
    const label = min ? 'Expand the dock' : 'Minimise the dock';
    for (const b of [this.grip, this.minBtn]) b.setAttribute('aria-label', label);
    this.grip.setAttribute('aria-expanded', String(!min));
    this.minBtn.replaceChildren(icon(min ? 'M7.4 15.4 12 10.8l4.6 4.6L18 14l-6-6-6 6z' : 'M7.4 8.6 12 13.2l4.6-4.6L18 10l-6 6-6-6z'));
    this.minBtn.title = min ? 'Expand the dock' : 'Minimise: watch the page';
  }

  /** @param {boolean} show */
  showConversations(show) {
    this.o.dock.classList.toggle('convs-open', show);
    this.convsBtn.setAttribute('aria-expanded', String(show));
    if (show) this.setMinimised(false);
  }

  /** Follows a drag of the grip: down minimises, up expands. @param {PointerEvent} ev */
  dragStart(ev) {
    const y0 = ev.clientY;
    this.dragged = false;
    const dock = this.o.dock;
    try { this.grip.setPointerCapture(ev.pointerId); } catch { /* a synthetic event */ }
    const move = (/** @type {PointerEvent} */ e) => {
      const dy = e.clientY - y0;
      if (!this.minimised && dy > 0) dock.style.transform = `translateY(${dy}px)`;
    };
    const end = (/** @type {PointerEvent} */ e) => {
      this.grip.removeEventListener('pointermove', move);
      this.grip.removeEventListener('pointerup', end);
      this.grip.removeEventListener('pointercancel', end);
      dock.style.transform = '';
      const dy = e.clientY - y0;
      if (Math.abs(dy) < DRAG_PX) return; // a tap: the click toggles
      this.dragged = true;
      this.setMinimised(dy > 0);
    };
    this.grip.addEventListener('pointermove', move);
    this.grip.addEventListener('pointerup', end);
    this.grip.addEventListener('pointercancel', end);
  }
}
