// The approvals inbox: "Waiting for you", the proposals the signed-in
// person may decide across every conversation they can see, oldest first,
// with when each expires. A button in the top bar carries the count; it
// opens the list, and each item opens its conversation in the dock with
// the proposal in view, where it is decided. The list follows the change
// stream (proposal.changed) and drops what expires. System's "Awaiting
// confirmation" and a #inbox link open it too.

import { h, replace, icon } from './dom.js';
import { fmtRelative, fmtTime, fmtShort } from './time.js';
import { mayConfirm } from './roles.js';
import { riskText, actorName } from './words.js';
import { coalesce } from './live.js';
import { errorText } from './api.js';

/**
 * @typedef {import('./app.js').Cockpit} Cockpit
 * @typedef {import('../../types/wire').ProposalState} ProposalState
 */

/**
 * Splits pending proposals into those me may decide and the others, each
 * oldest first, dropping any already past its expiry.
 * @param {ProposalState[]} proposals @param {import('./roles.js').Me | null} me @param {number} now Unix seconds
 * @returns {{mine: ProposalState[], others: ProposalState[]}}
 */
export function sortInbox(proposals, me, now) {
  const open = proposals.filter((p) => p.status === 'pending' && p.expiresAt > now).sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  return { mine: open.filter((p) => mayConfirm(me, p).allowed), others: open.filter((p) => !mayConfirm(me, p).allowed) };
}

export class Inbox {
  /** @param {Cockpit} cockpit */
  constructor(cockpit) {
    this.cockpit = cockpit;
    /** @type {ProposalState[]} */
    this.mine = [];
    /** @type {ProposalState[]} */
    this.others = [];
    /** @type {Map<string, number>} pending proposals by conversation (any, decidable or not) */
    this.waiting = new Map();
    /** @type {Map<string, string>} conversation titles by id */
    this.titles = new Map();
    this.count = h('span', { class: 'inbox-count', 'data-inbox-count': '0', text: '0' });
    /** @type {HTMLElement} */
    this.said = h('span');
    this.button = h('button', {
      type: 'button', class: 'inbox-toggle', 'data-inbox': '', 'aria-haspopup': 'dialog', title: 'Proposals waiting for your decision',
      onclick: () => this.open(),
    }, icon('M3 13h4l2 3h6l2-3h4v6a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2zm2-9h14l2 9h-5l-2 3h-4l-2-3H3z'), h('span', { class: 'inbox-label', text: 'Waiting for you' }), this.count,
    this.said = h('span', { class: 'visually-hidden', text: ' proposals to decide' }));
    /** @type {HTMLDialogElement | null} */
    this.dialog = null;
    this.loaded = false;
    this.refreshSoon = coalesce(() => this.refresh(), 300);
    /** @type {any} */
    this.timer = null;
    this.label();
  }

  /** Follows the change stream and starts the first read. */
  start() {
    this.cockpit.live.subscribe((e) => { if (e.type === 'proposal.changed' || e.type === 'reset') this.refreshSoon(); });
    this.refresh();
  }

  /** Reads the pending proposals again (and re-reads when the next one expires). */
  async refresh() {
    clearTimeout(this.timer);
    let list;
    try {
      const [r, cs] = await Promise.all([
        this.cockpit.api.get('/api/operator/proposals?status=pending'),
        this.cockpit.operator.listConversations({ limit: 100 }).catch(() => ({ conversations: [] })),
      ]);
      list = /** @type {ProposalState[]} */ (r.proposals || []);
      for (const c of cs.conversations || []) this.titles.set(c.id, c.title || '');
    } catch {
      return; // signed out, or the daemon is away: the badge keeps its count
    }
    const now = Date.now() / 1000;
    const { mine, others } = sortInbox(list, this.cockpit.me, now);
    this.mine = mine;
    this.others = others;
    this.waiting = new Map();
    for (const p of [...mine, ...others]) this.waiting.set(p.conversationId, (this.waiting.get(p.conversationId) || 0) + 1);
    this.loaded = true;
    this.label();
    if (this.dialog && this.dialog.open) this.renderList();
    if (this.cockpit.dock) this.cockpit.dock.list.relabel();
    // The next expiry takes its proposal out of the list.
    const next = Math.min(...[...mine, ...others].map((p) => p.expiresAt));
    if (Number.isFinite(next)) this.timer = setTimeout(() => this.refresh(), Math.max(1000, (next - now) * 1000 + 500));
  }

  /** The badge: the count, said in words to assistive technology. */
  label() {
    const n = this.mine.length;
    this.count.textContent = String(n);
    this.count.dataset.inboxCount = String(n);
    this.button.classList.toggle('has-waiting', n > 0);
    // The visible words, then the count, then what it counts: the name a
    // screen reader says contains what is seen.
    this.said.textContent = ` proposal${n === 1 ? '' : 's'} to decide`;
  }

  /** Opens the list (a dialog; Escape closes it, focus goes back). */
  open() {
    if (this.dialog && this.dialog.open) return;
    const dlg = h('dialog', { class: 'dialog inbox', 'aria-labelledby': 'inbox-title', 'data-inbox-dialog': '' });
    this.dialog = dlg;
    const before = /** @type {HTMLElement | null} */ (document.activeElement);
    dlg.addEventListener('close', () => {
      dlg.remove();
      if (this.dialog === dlg) this.dialog = null;
      if (before && before.isConnected) before.focus();
    });
    document.body.appendChild(dlg);
    this.renderList();
    dlg.showModal();
    const first = /** @type {HTMLElement | null} */ (dlg.querySelector('[data-open-proposal]') || dlg.querySelector('button'));
    if (first) first.focus();
    if (!this.loaded) this.refresh();
  }

  renderList() {
    const dlg = this.dialog;
    if (!dlg) return;
    const now = Date.now() / 1000;
    const item = (/** @type {ProposalState} */ p) => {
      const title = this.titles.get(p.conversationId);
      return h('li', { class: 'inbox-item', 'data-proposal-id': p.id, 'data-conversation-id': p.conversationId },
        h('p', { class: 'inbox-summary' }, h('strong', { text: p.summary })),
        h('p', { class: 'muted small' },
          h('span', { class: 'risk-word', text: riskText(p.risk) }), p.impact ? ` · ${p.impact}` : '',
          ` · in ${title ? `“${title}”` : 'an untitled conversation'}`,
          p.submittedBy ? ` · ${p.origin === 'request' ? 'requested' : 'proposed'} by ${actorName(p.submittedBy)}` : '',
          ' · ', h('time', { datetime: new Date(p.createdAt * 1000).toISOString(), title: fmtTime(p.createdAt), text: `waiting ${fmtRelative(p.createdAt).replace(/ ago$/, '')}` })),
        h('p', { class: 'inbox-expiry small', 'data-expires': String(p.expiresAt) },
          `Expires ${fmtRelative(p.expiresAt)}, at `, h('time', { datetime: new Date(p.expiresAt * 1000).toISOString(), title: fmtTime(p.expiresAt), text: fmtShort(p.expiresAt, now) }), '.'),
        h('button', {
          type: 'button', class: 'primary small', 'data-open-proposal': p.id, text: 'Open to decide',
          onclick: () => this.go(p),
        }));
    };
    replace(dlg,
      h('div', { class: 'inbox-head' },
        h('h2', { id: 'inbox-title', text: 'Waiting for you' }),
        h('button', { type: 'button', class: 'icon-button', 'aria-label': 'Close', text: '×', onclick: () => dlg.close() })),
      h('p', { class: 'muted small', text: 'Proposals you may decide, in every conversation you can see, oldest first. Each opens in the dock, where you confirm, deny or edit it.' }),
      this.mine.length === 0 ? h('p', { class: 'empty-inbox', 'data-inbox-empty': '', text: this.loaded ? 'Nothing waits for your decision.' : 'Loading…' })
        : h('ol', { class: 'inbox-list', 'aria-label': 'Proposals waiting for you' }, this.mine.map(item)),
      this.others.length ? h('details', { class: 'inbox-others' },
        h('summary', { text: `${this.others.length} more wait${this.others.length === 1 ? 's' : ''} for someone else` }),
        h('ol', { class: 'inbox-list' }, this.others.map(item))) : null);
  }

  /** Opens a proposal's conversation in the dock, the proposal in view. @param {ProposalState} p */
  go(p) {
    if (this.dialog) this.dialog.close();
    this.cockpit.openConversation(p.conversationId, p.id).catch((e) => this.cockpit.flash(`Could not open the proposal: ${errorText(e)}`, 'error'));
  }
}
