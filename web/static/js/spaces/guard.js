// Holding the controls the signed-in principal may not use.

import { h } from '../dom.js';
import { may, ACTION_ROLES } from '../roles.js';

/**
 * The controls of a space that change something need a permission (an
 * action of roles.js, asked through may(): the one place the cockpit
 * decides): an element marked data-needs="ACTION" needs that one; a
 * space's primary, danger and submit buttons and its data-action buttons
 * need "change" unless marked otherwise (data-needs="read"). Those the
 * signed-in principal may not use are disabled, their reason in the
 * tooltip, in the accessible description and in a note at the top of the
 * space: never a control that only fails.
 * @param {HTMLElement} root @param {import('../roles.js').Me | null} me
 * @returns {number} how many controls are held
 */
export function guardControls(root, me) {
  if (!me) return 0;
  let held = 0;
  /** @type {Set<string>} */
  const reasons = new Set();
  const noteId = 'read-only-note';
  root.querySelectorAll('[data-needs], button.primary, button.danger, button[type=submit], button[data-action]').forEach((node) => {
    const el = /** @type {HTMLButtonElement | HTMLInputElement | HTMLSelectElement} */ (node);
    const action = /** @type {keyof typeof ACTION_ROLES} */ (el.dataset.needs || 'change');
    const v = may(me, action in ACTION_ROLES ? action : 'change');
    if (v.allowed) return;
    held++;
    reasons.add(v.reason);
    if (el.dataset.held) return;
    el.dataset.held = action;
    el.disabled = true;
    el.title = v.reason;
    const described = (el.getAttribute('aria-describedby') || '').split(' ').filter(Boolean);
    if (!described.includes(noteId)) el.setAttribute('aria-describedby', [...described, noteId].join(' '));
  });
  let note = /** @type {HTMLElement | null} */ (root.querySelector(':scope > [data-read-only]'));
  if (held && !note) {
    note = h('p', { class: 'read-only-note', id: noteId, 'data-read-only': '', role: 'note',
      text: `You are signed in as ${me.name} (${me.role}): you can look here. The greyed-out controls are held: ${[...reasons].join(' ')} An admin can change your role.` });
    root.prepend(note);
  }
  return held;
}
