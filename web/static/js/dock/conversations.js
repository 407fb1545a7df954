// The conversation picker and its actions: new, rename, archive (read-only,
// replayable) or unarchive, delete, pin, restore (a deleted one, within the
// recovery window), and the model a conversation's next turns use. The list
// is searchable (titles and turn text, on the server) and lists pinned
// conversations first. It lists and changes conversations; the dock
// decides what opening one means.

import { h, replace } from '../dom.js';
import { fmtShort, fmtTime } from '../time.js';
import { fitRow, measurer } from '../fit-text.js';
import { errorText } from '../api.js';
import { confirmDialog, promptDialog } from '../dialogs.js';

/**
 * @typedef {import('../frames.js').Conversation} Conversation
 * @typedef {import('../operator-api.js').OperatorClient} OperatorClient
 */

export class ConversationList {
  /**
   * @param {{client: OperatorClient, current: () => Conversation | null, onSelect: (id: string) => Promise<void>, onNew: () => void, onChanged: (c: Conversation) => void, onDeleted: (id: string) => Promise<void>, notice: (text: string) => void,
   *   may?: (action: 'converse' | 'deleteConversation') => import('../roles.js').Verdict, waiting?: () => Map<string, number>}} o
   * may says what the signed-in principal may do: the rest is disabled with the reason; waiting, how many
   * proposals wait for a decision in each conversation (the inbox's count).
   */
  constructor(o) {
    this.o = o;
    /** @type {Conversation[]} */
    this.items = [];
    /** @type {Map<string, Conversation>} what the list shows, by id */
    this.shown = new Map();
    /** @type {{name: string, provider: string, model?: string, default: boolean, reachable: boolean, problem?: string}[]} */
    this.models = [];
    this.deleted = false;
    this.searchSeq = 0;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.searchTimer = undefined;
    this.search = h('input', {
      type: 'search', id: 'dock-conv-search', placeholder: 'Search conversations', autocomplete: 'off',
      'aria-controls': 'dock-conv', oninput: () => this.searchSoon(),
    });
    this.deletedBox = h('input', { type: 'checkbox', id: 'dock-conv-deleted', onchange: () => { this.deleted = this.deletedBox.checked; this.refresh(); } });
    this.select = h('select', { id: 'dock-conv', size: '5', onchange: () => this.pick() });
    /** @type {WeakMap<HTMLOptionElement, {head: string, tail: string}>} each row's title and marks, before fitting */
    this.rows = new WeakMap();
    // The rows fit the list's width: the dock's, which a window or the sheet resizes.
    new ResizeObserver(() => this.fit()).observe(this.select);
    this.archiveBtn = h('button', { type: 'button', class: 'small', text: 'Archive', onclick: () => this.archive() });
    this.pinBtn = h('button', { type: 'button', class: 'small', 'data-action': 'pin', text: 'Pin', onclick: () => this.pin() });
    this.restoreBtn = h('button', { type: 'button', class: 'small', 'data-action': 'restore', text: 'Restore', hidden: true, onclick: () => this.restore() });
    this.modelSelect = h('select', { id: 'dock-model', onchange: () => this.chooseModel() });
    this.modelNote = h('span', { class: 'muted small', 'data-model-note': '' });
    this.el = h('div', { class: 'dock-convs' },
      h('div', { class: 'conv-search' },
        h('label', { for: 'dock-conv-search', class: 'visually-hidden', text: 'Search conversations by title or text' }), this.search,
        h('label', { class: 'small' }, this.deletedBox, ' Deleted')),
      h('label', { for: 'dock-conv', class: 'visually-hidden', text: 'Conversation' }), this.select,
      h('div', { class: 'conv-actions', role: 'group', 'aria-label': 'Conversation actions' },
        // A new conversation starts with its first message: New only clears the dock for it.
        this.newBtn = h('button', { type: 'button', class: 'small', 'data-action': 'new-conversation', text: 'New', onclick: () => this.o.onNew() }),
        this.renameBtn = h('button', { type: 'button', class: 'small', text: 'Rename', onclick: () => this.rename() }),
        this.archiveBtn,
        this.deleteBtn = h('button', { type: 'button', class: 'small danger', text: 'Delete', onclick: () => this.remove() }),
        this.pinBtn, this.restoreBtn),
      h('div', { class: 'conv-model' },
        h('label', { for: 'dock-model', class: 'small', text: 'Model' }), this.modelSelect, this.modelNote));
  }

  searchSoon() {
    clearTimeout(this.searchTimer);
    this.searchTimer = setTimeout(() => this.refresh(), 200);
  }

  /** The conversation picked in the list: opened, unless the list shows deleted ones. */
  pick() {
    this.sync();
    if (!this.deleted) this.o.onSelect(this.select.value);
  }

  async refresh() {
    const seq = ++this.searchSeq;
    /** @type {{limit: number, q?: string, status?: string}} */
    const q = { limit: 100 };
    const text = this.search.value.trim();
    if (text) q.q = text;
    if (this.deleted) q.status = 'deleted';
    let items;
    try {
      items = (await this.o.client.listConversations(q)).conversations;
    } catch (e) {
      this.o.notice(`Conversations could not be loaded: ${errorText(e)}`);
      return;
    }
    if (seq !== this.searchSeq) return; // a newer search answered, or will
    // The deleted and the searched are a view; the dock opens from the full list.
    if (!text && !this.deleted) this.items = items;
    this.shown = new Map(items.map((c) => [c.id, c]));
    const cur = this.o.current();
    const empty = text ? 'No conversation matches' : this.deleted ? 'No deleted conversation is recoverable' : 'No conversations';
    replace(this.select,
      items.length === 0 ? h('option', { value: '', disabled: true, text: empty }) : null,
      items.map((c) => this.label(h('option', { value: c.id, selected: cur && !this.deleted ? c.id === cur.id : false, 'data-pinned': c.pinned ? 'true' : 'false' }), c)));
    // As tall as its items, 2 to 5 rows: the transcript keeps the room.
    this.select.size = Math.min(5, Math.max(2, items.length));
    this.fit();
    this.sync();
  }

  /**
   * Writes a conversation's row: its title, whether proposals wait in it,
   * and when in short. The marks and the time stay whole and the title
   * gives way to them, ellipsized; the whole title, the count in words
   * and the whole date are the tooltip.
   * @param {HTMLOptionElement} opt @param {Conversation} c
   */
  label(opt, c) {
    const waiting = (this.o.waiting && this.o.waiting().get(c.id)) || 0;
    const label = `${c.pinned ? '★ ' : ''}${c.title || 'Untitled'}${c.status === 'archived' ? ' (archived)' : ''}${c.forkedFrom ? ' (fork)' : ''}`;
    const at = c.deletedAt || c.updatedAt;
    const age = fmtShort(at);
    const tail = `${waiting ? ` · ${waiting} waiting` : ''} · ${age}`;
    this.rows.set(opt, { head: label, tail });
    opt.textContent = label + tail;
    opt.title = `${label}${waiting ? ` · ${waiting} waiting for a decision` : ''}, ${c.deletedAt ? 'deleted' : 'last active'} ${fmtTime(at)}`;
    opt.dataset.waiting = String(waiting);
    opt.dataset.age = age;
    return opt;
  }

  /** Fits every row to the list's width (while the list is shown: hidden, it has none). */
  fit() {
    const opts = [...this.select.options];
    if (!opts.length || !this.select.clientWidth) return;
    const px = (/** @type {Element} */ e) => { const cs = getComputedStyle(e); return parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight); };
    // A pixel to spare: the canvas and the list round text differently.
    const width = this.select.clientWidth - px(this.select) - px(opts[0]) - 1;
    const measure = measurer(this.select);
    for (const opt of opts) {
      const row = this.rows.get(opt);
      if (row) opt.textContent = fitRow(row.head, row.tail, width, measure);
    }
  }

  /** Rewrites the rows' marks (the inbox's counts changed), without reading the list again. */
  relabel() {
    for (const opt of this.select.options) {
      const c = this.shown.get(opt.value);
      if (c) this.label(opt, c);
    }
    this.fit();
  }

  /**
   * Marks the current conversation in the list, when the dock opened it
   * itself (a fork, after a delete, at start), then matches the buttons.
   */
  markCurrent() {
    const cur = this.o.current();
    if (cur && !this.deleted && [...this.select.options].some((o) => o.value === cur.id)) this.select.value = cur.id;
    this.sync();
  }

  /** Matches the buttons and the model picker to the current conversation. */
  sync() {
    const cur = this.o.current();
    this.archiveBtn.textContent = cur && cur.status === 'archived' ? 'Unarchive' : 'Archive';
    this.pinBtn.textContent = cur && cur.pinned ? 'Unpin' : 'Pin';
    this.pinBtn.setAttribute('aria-pressed', cur && cur.pinned ? 'true' : 'false');
    this.restoreBtn.hidden = !this.deleted;
    this.restoreBtn.disabled = !this.select.value;
    this.syncModel();
    // What the signed-in role may not do is disabled, its reason the tooltip.
    const may = this.o.may;
    if (!may) return;
    for (const [btn, action] of /** @type {[HTMLButtonElement | HTMLSelectElement, 'converse' | 'deleteConversation'][]} */ ([
      [this.newBtn, 'converse'], [this.renameBtn, 'converse'], [this.archiveBtn, 'converse'], [this.pinBtn, 'converse'], [this.modelSelect, 'converse'],
      [this.deleteBtn, 'deleteConversation'], [this.restoreBtn, 'deleteConversation']])) {
      const v = may(action);
      if (v.allowed) continue;
      btn.disabled = true;
      btn.title = v.reason;
    }
  }

  /** Loads the configured models once. */
  async loadModels() {
    try {
      this.models = (await this.o.client.models()).models;
    } catch {
      this.models = [];
    }
    this.syncModel();
  }

  syncModel() {
    const cur = this.o.current();
    const chosen = (cur && cur.model) || '';
    const def = this.models.find((m) => m.default);
    replace(this.modelSelect,
      h('option', { value: '', selected: chosen === '', text: `Default${def ? ` (${def.name})` : ''}` }),
      this.models.map((m) => h('option', {
        value: m.name, selected: m.name === chosen,
        text: `${m.name}${m.model ? ` · ${m.model}` : ''}${m.reachable ? '' : ' (unreachable)'}`,
      })));
    this.modelSelect.disabled = !cur || cur.status !== 'active';
  }

  async chooseModel() {
    const cur = this.o.current();
    if (!cur) return;
    const model = this.modelSelect.value;
    try {
      const c = await this.o.client.updateConversation(cur.id, { model });
      this.o.onChanged(c);
      this.modelNote.textContent = cur.activeRequestId ? 'Applies from the next turn.' : `Next turns use ${model || 'the default model'}.`;
    } catch (e) {
      this.o.notice(`The model could not be changed: ${errorText(e)}`);
      this.syncModel();
    }
  }

  async pin() {
    const cur = this.o.current();
    if (!cur) return;
    try {
      this.o.onChanged(await this.o.client.updateConversation(cur.id, { pinned: !cur.pinned }));
      await this.refresh();
    } catch (e) {
      this.o.notice(`${cur.pinned ? 'Unpin' : 'Pin'} failed: ${errorText(e)}`);
    }
  }

  async restore() {
    const id = this.select.value;
    if (!id) return;
    try {
      const c = await this.o.client.restoreConversation(id);
      this.deleted = this.deletedBox.checked = false;
      await this.refresh();
      await this.o.onSelect(c.id);
    } catch (e) {
      this.o.notice(`Restore failed: ${errorText(e)}`);
    }
  }

  /** @param {{title?: string}} [body] @returns {Promise<Conversation | null>} */
  async create(body = {}) {
    try {
      const c = await this.o.client.createConversation(body);
      await this.refresh();
      await this.o.onSelect(c.id);
      return c;
    } catch (e) {
      this.o.notice(`New conversation failed: ${errorText(e)}`);
      return null;
    }
  }

  async rename() {
    const cur = this.o.current();
    if (!cur) return;
    const title = await promptDialog('Rename conversation', 'Title', cur.title || '');
    if (title === null) return;
    try {
      this.o.onChanged(await this.o.client.updateConversation(cur.id, { title: title.trim() }));
      await this.refresh();
    } catch (e) {
      this.o.notice(`Rename failed: ${errorText(e)}`);
    }
  }

  async archive() {
    const cur = this.o.current();
    if (!cur) return;
    const to = cur.status === 'archived' ? 'active' : 'archived';
    try {
      this.o.onChanged(await this.o.client.updateConversation(cur.id, { status: to }));
      await this.refresh();
    } catch (e) {
      this.o.notice(`${to === 'archived' ? 'Archive' : 'Unarchive'} failed: ${errorText(e)}`);
    }
  }

  async remove() {
    const c = this.o.current();
    if (!c) return;
    if (!(await confirmDialog({ title: 'Delete this conversation?', body: `“${c.title || 'Untitled'}” disappears from the dock. An administrator can recover it for a while before maintenance purges it.`, confirm: 'Delete', danger: true }))) return;
    try {
      await this.o.client.deleteConversation(c.id);
      await this.o.onDeleted(c.id);
    } catch (e) {
      this.o.notice(`Delete failed: ${errorText(e)}`);
    }
  }
}
