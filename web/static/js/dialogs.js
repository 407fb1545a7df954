// Modal dialogs (<dialog> with showModal: focus is trapped, Escape cancels,
// focus returns to where it was). Used by the spaces and the dock.

import { h, uid } from './dom.js';

/**
 * Shows a dialog and resolves with its return value when it closes.
 * @param {HTMLDialogElement} dlg @param {HTMLElement | null} focus
 * @returns {Promise<string>}
 */
export function showDialog(dlg, focus) {
  const before = /** @type {HTMLElement | null} */ (document.activeElement);
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => {
      resolve(dlg.returnValue);
      dlg.remove();
      if (before && before.isConnected) before.focus();
    });
    document.body.appendChild(dlg);
    dlg.showModal();
    if (focus) focus.focus();
  });
}

/**
 * A modal confirmation; Cancel has the focus, so Enter never confirms by accident.
 * @param {{title: string, body: string, confirm: string, cancel?: string, danger?: boolean}} o
 * @returns {Promise<boolean>}
 */
export async function confirmDialog(o) {
  const titleId = uid('dlg');
  const cancel = h('button', { value: 'cancel', type: 'button', text: o.cancel || 'Cancel', onclick: () => dlg.close('cancel') });
  const dlg = h('dialog', { class: 'dialog', 'aria-labelledby': titleId, 'aria-describedby': titleId + '-body' },
    h('form', { method: 'dialog' },
      h('h2', { id: titleId, text: o.title }),
      h('p', { id: titleId + '-body', text: o.body }),
      h('div', { class: 'actions' }, cancel,
        h('button', { value: 'ok', type: 'submit', class: o.danger ? 'danger' : 'primary', text: o.confirm }))));
  return (await showDialog(dlg, cancel)) === 'ok';
}

/**
 * A modal one-field prompt; Enter in the field saves.
 * @param {string} title @param {string} label @param {string} value
 * @returns {Promise<string | null>}
 */
export async function promptDialog(title, label, value) {
  const id = uid('prompt');
  const input = h('input', { id, value, maxlength: '200' });
  const dlg = h('dialog', { class: 'dialog', 'aria-labelledby': id + '-title' },
    h('form', { method: 'dialog' }, h('h2', { id: id + '-title', text: title }), h('div', { class: 'field' }, h('label', { for: id, text: label }), input),
      h('div', { class: 'actions' }, h('button', { type: 'button', value: 'cancel', text: 'Cancel', onclick: () => dlg.close('cancel') }), h('button', { value: 'ok', class: 'primary', text: 'Save' }))));
  const v = await showDialog(dlg, input);
  return v === 'ok' ? input.value : null;
}
