// The conversation picker and its actions: new, rename, archive (read-only,
// replayable) or unarchive, delete. It lists and changes conversations; the
// dock decides what opening one means.

import { h, replace, fmtTime } from '../dom.js';
import { errorText } from '../api.js';
import { confirmDialog, promptDialog } from '../dialogs.js';

/**
 * @typedef {import('../frames.js').Conversation} Conversation
 * @typedef {import('../operator-api.js').OperatorClient} OperatorClient
 */

export class ConversationList {
  /**
   * @param {{client: OperatorClient, current: () => Conversation | null, onSelect: (id: string) => Promise<void>, onCreated: () => void, onChanged: (c: Conversation) => void, onDeleted: (id: string) => Promise<void>, notice: (text: string) => void}} o
   */
  constructor(o) {
    this.o = o;
    /** @type {Conversation[]} */
    this.items = [];
    this.select = h('select', { id: 'dock-conv', onchange: () => this.o.onSelect(this.select.value) });
    this.archiveBtn = h('button', { type: 'button', class: 'small', text: 'Archive', onclick: () => this.archive() });
    this.el = h('div', { class: 'dock-convs' },
      h('label', { for: 'dock-conv', class: 'visually-hidden', text: 'Conversation' }), this.select,
      h('div', { class: 'conv-actions', role: 'group', 'aria-label': 'Conversation actions' },
        h('button', { type: 'button', class: 'small', text: 'New', onclick: async () => { if (await this.create()) this.o.onCreated(); } }),
        h('button', { type: 'button', class: 'small', text: 'Rename', onclick: () => this.rename() }),
        this.archiveBtn,
        h('button', { type: 'button', class: 'small danger', text: 'Delete', onclick: () => this.remove() })));
  }

  async refresh() {
    try {
      const r = await this.o.client.listConversations({ limit: 100 });
      this.items = r.conversations;
    } catch (e) {
      this.o.notice(`Conversations could not be loaded: ${errorText(e)}`);
      return;
    }
    const cur = this.o.current();
    replace(this.select,
      this.items.length === 0 ? h('option', { value: '', text: 'No conversations' }) : null,
      this.items.map((c) => h('option', {
        value: c.id, selected: cur ? c.id === cur.id : false,
        text: `${c.title || 'Untitled'}${c.status === 'archived' ? ' (archived)' : ''} · ${fmtTime(c.updatedAt)}`,
      })));
    this.sync();
  }

  /** Matches the archive button to the current conversation. */
  sync() {
    const cur = this.o.current();
    this.archiveBtn.textContent = cur && cur.status === 'archived' ? 'Unarchive' : 'Archive';
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
