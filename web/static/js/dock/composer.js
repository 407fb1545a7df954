// The composer: the message box, the context it sends, Send and Cancel. It
// submits a turn once with expectedLastSequence; a stale_context or
// conflict is explained and the conversation refreshed, never resubmitted.
// While a turn runs, Send becomes "Send after this" (the message waits
// behind it: whenBusy enqueue) and "Stop and send" cancels the running
// turn and sends (whenBusy interrupt). A person's approval request has no
// model turn to stop: while it waits, its card's Confirm and Deny (or the
// requester's Withdraw) are the choices, not a cancel.

import { h, uid } from '../dom.js';

const PLACEHOLDER = 'Ask the operator… (Enter sends, Shift+Enter for a new line)';

export class Composer {
  /**
   * @param {{onSend: (instruction: string, whenBusy?: 'enqueue'|'interrupt') => void, onCancel: () => void}} o
   */
  constructor(o) {
    const id = uid('composer');
    this.input = h('textarea', {
      id, rows: '3', placeholder: PLACEHOLDER, maxlength: '32768', 'aria-describedby': id + '-ctx',
      onkeydown: (/** @type {KeyboardEvent} */ ev) => {
        if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
          ev.preventDefault();
          o.onSend(this.input.value.trim(), this.running ? 'enqueue' : undefined);
        }
      },
    });
    this.contextChip = h('p', { class: 'context-chip muted small', id: id + '-ctx' });
    this.running = false;
    this.sendBtn = h('button', { type: 'submit', class: 'primary', text: 'Send' });
    this.stopSendBtn = h('button', { type: 'button', hidden: true, 'data-when-busy': 'interrupt', text: 'Stop and send',
      title: 'Cancel the running turn (its proposal too) and send this message',
      onclick: () => o.onSend(this.input.value.trim(), 'interrupt') });
    this.cancelBtn = h('button', { type: 'button', class: 'danger', hidden: true, text: 'Cancel turn', onclick: () => o.onCancel() });
    this.status = h('p', { class: 'form-error', role: 'alert' });
    this.el = h('form', { class: 'composer', 'aria-label': 'Message the operator', onsubmit: (/** @type {Event} */ ev) => { ev.preventDefault(); o.onSend(this.input.value.trim(), this.running ? 'enqueue' : undefined); } },
      h('label', { for: id, class: 'visually-hidden', text: 'Message to the operator' }),
      this.input, this.contextChip, this.status,
      h('div', { class: 'actions' }, this.cancelBtn, this.stopSendBtn, this.sendBtn));
  }

  /** @param {string} text */
  setContext(text) { this.contextChip.textContent = text; }

  /** @param {string} text */
  say(text) { this.status.textContent = text; }

  /** Whether a message may be sent now. */
  get ready() { return !this.sendBtn.disabled; }

  /** @param {boolean} busy */
  setBusy(busy) { this.sendBtn.disabled = busy; this.stopSendBtn.disabled = busy; }

  /**
   * @param {{running: boolean, archived: boolean, denied?: string, awaiting?: boolean, request?: boolean}} s
   * denied: why the signed-in principal may not send at all (its role); awaiting: the running turn
   * waits for a decision on its proposal; request: that proposal is a person's approval request.
   */
  update(s) {
    this.running = s.running;
    const request = !!s.awaiting && !!s.request;
    this.cancelBtn.hidden = !s.running || request;
    this.stopSendBtn.hidden = !s.running || !!s.denied || request;
    this.sendBtn.disabled = this.stopSendBtn.disabled = s.archived || !!s.denied;
    this.sendBtn.textContent = s.running ? 'Send after this' : 'Send';
    this.sendBtn.dataset.whenBusy = s.running ? 'enqueue' : '';
    this.input.disabled = s.archived || !!s.denied;
    this.el.dataset.denied = s.denied ? 'role' : '';
    this.cancelBtn.disabled = !!s.denied;
    this.cancelBtn.title = s.denied ? `Cancelling a turn ${s.denied.charAt(0).toLowerCase()}${s.denied.slice(1)}` : '';
    if (s.denied) {
      this.input.placeholder = 'Read only';
      if (this.status.textContent === '') this.say(`Read only: sending messages ${s.denied.charAt(0).toLowerCase()}${s.denied.slice(1)}`);
    } else if (s.archived) this.input.placeholder = 'This conversation is archived: read-only. Unarchive it to continue.';
    // One turn runs at a time per conversation: a message sent meanwhile
    // waits behind it, or stops it.
    else if (request) this.input.placeholder = 'An approval request above waits for a decision: confirm or deny it on its card. A message sent now runs after it is decided.';
    else if (s.awaiting) this.input.placeholder = 'A proposal above waits for a decision. A message sent now runs after it is decided; Stop and send drops the proposal.';
    else this.input.placeholder = s.running ? 'A turn is running… a message sent now runs after it; Stop and send cancels it.' : PLACEHOLDER;
    this.cancelBtn.textContent = s.awaiting ? 'Cancel turn and proposal' : 'Cancel turn';
  }

  clear() { this.input.value = ''; }
  focus() { this.input.focus(); }
}
