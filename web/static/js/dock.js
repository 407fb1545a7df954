// The operator dock: conversations, the transcript of streamed frames, the
// composer, effects and proposals. It uses the protocol client and the
// cockpit's effect applier; the cockpit never depends on it.

import { h, replace, append, icon, uid, fmtTime } from './dom.js';
import { ApiError } from './api.js';
import { ConversationStream, CursorStore, EffectLog, FrameError, defaultStorage, parseFrame } from './protocol.js';
import { checkFresh } from './effects.js';
import { parse as parseMarkdown, render as renderMarkdown } from './markdown.js';
import { ProposalCard } from './proposal.js';

/**
 * @typedef {import('./protocol.js').Frame} Frame
 * @typedef {import('./protocol.js').Conversation} Conversation
 * @typedef {import('./protocol.js').EffectRecord} EffectRecord
 * @typedef {import('./app.js').Cockpit} Cockpit
 * @typedef {'history'|'catchup'|'live'} Mode
 */

const CONV_KEY = 'studio.conversation';
const DEGRADED_CODES = ['audit_unavailable', 'service_failure'];

/** @param {Record<string, any>} e */
function describeEffect(e) {
  switch (e.kind) {
    case 'navigate': {
      const params = Object.entries(e.params || {}).map(([k, v]) => `${k}=${v}`).join(', ');
      return `Open ${e.space}${params ? ` (${params})` : ''}`;
    }
    case 'select':
      return `Select ${Object.entries(e.selection || {}).map(([k, v]) => `${k} ${v}`).join(', ')} in ${e.space}`;
    case 'prefill':
      return `Fill in the ${e.form} form (${Object.keys(e.values || {}).join(', ')})`;
    case 'theme':
      return `Switch to the ${e.theme} theme`;
  }
  return `Unknown effect “${e.kind}”`;
}

export class Dock {
  /** @param {HTMLElement} root @param {Cockpit} cockpit */
  constructor(root, cockpit) {
    this.root = root;
    this.cockpit = cockpit;
    this.client = cockpit.operator;
    const storage = defaultStorage();
    this.cursors = new CursorStore(storage);
    this.effects = new EffectLog(storage);
    this.started = false;
    /** @type {Conversation[]} */
    this.conversations = [];
    /** @type {Conversation | null} */
    this.conv = null;
    /** @type {ConversationStream | null} */
    this.stream = null;
    this.lastSeq = 0;
    /** @type {string | null} */
    this.activeRequestId = null;
    /** Effects applied by this page since it loaded (tests read it). */
    this.appliedCount = 0;
    this.openSeq = 0;
    // Elements made by buildUI() and state reset by resetTranscript().
    /** @type {HTMLSelectElement} */ this.convSelect;
    /** @type {HTMLElement} */ this.statePill;
    /** @type {HTMLElement} */ this.banner;
    /** @type {HTMLOListElement} */ this.transcript;
    /** @type {HTMLTextAreaElement} */ this.input;
    /** @type {HTMLElement} */ this.contextChip;
    /** @type {HTMLButtonElement} */ this.sendBtn;
    /** @type {HTMLButtonElement} */ this.cancelBtn;
    /** @type {HTMLElement} */ this.composerStatus;
    /** @type {HTMLButtonElement} */ this.archiveBtn;
    /** @type {Set<string>} requests whose done frame arrived */ this.finished = new Set();
    /** @type {Map<string, ProposalCard>} */ this.proposals = new Map();
    /** @type {Map<string, HTMLDetailsElement>} */ this.toolCalls = new Map();
    /** @type {{requestId: string, el: HTMLElement, text: string} | null} */ this.textBubble = null;
    this.buildUI();
  }

  buildUI() {
    const composerId = uid('composer');
    this.convSelect = h('select', { id: 'dock-conv', 'aria-label': 'Conversation', onchange: () => this.select(this.convSelect.value) });
    this.statePill = h('span', { class: 'pill', 'data-state': 'idle', role: 'status', 'aria-live': 'polite', text: 'Not connected' });
    this.banner = h('div', { class: 'dock-banners', 'aria-live': 'assertive' });
    this.transcript = h('ol', { class: 'transcript', 'aria-label': 'Conversation transcript', tabindex: '0' });
    this.input = h('textarea', {
      id: composerId, rows: '3', placeholder: 'Ask the operator… (Enter sends, Shift+Enter for a new line)', maxlength: '32768',
      onkeydown: (/** @type {KeyboardEvent} */ ev) => {
        if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
          ev.preventDefault();
          this.send();
        }
      },
    });
    this.contextChip = h('p', { class: 'context-chip muted small', id: composerId + '-ctx' });
    this.sendBtn = h('button', { type: 'submit', class: 'primary', text: 'Send' });
    this.cancelBtn = h('button', { type: 'button', class: 'danger', hidden: true, text: 'Cancel turn', onclick: () => this.cancelTurn() });
    this.composerStatus = h('p', { class: 'form-error', role: 'alert' });
    this.archiveBtn = h('button', { type: 'button', class: 'small', text: 'Archive', onclick: () => this.archive() });
    const form = h('form', { class: 'composer', onsubmit: (/** @type {Event} */ ev) => { ev.preventDefault(); this.send(); } },
      h('label', { for: composerId, class: 'visually-hidden', text: 'Message to the operator' }),
      this.input, this.contextChip, this.composerStatus,
      h('div', { class: 'actions' }, this.cancelBtn, this.sendBtn));
    this.input.setAttribute('aria-describedby', composerId + '-ctx');
    replace(this.root,
      h('header', { class: 'dock-head' },
        h('h2', { text: 'Operator' }), this.statePill,
        h('button', { type: 'button', class: 'icon-button', 'aria-label': 'Close the dock', title: 'Close (Ctrl+.)', onclick: () => this.cockpit.setDockOpen(false) }, icon('M6.4 5 5 6.4 10.6 12 5 17.6 6.4 19l5.6-5.6 5.6 5.6 1.4-1.4-5.6-5.6L19 6.4 17.6 5 12 10.6z'))),
      h('div', { class: 'dock-convs' },
        h('label', { for: 'dock-conv', class: 'visually-hidden', text: 'Conversation' }), this.convSelect,
        h('div', { class: 'conv-actions' },
          h('button', { type: 'button', class: 'small', text: 'New', onclick: () => this.newConversation() }),
          h('button', { type: 'button', class: 'small', text: 'Rename', onclick: () => this.rename() }),
          this.archiveBtn,
          h('button', { type: 'button', class: 'small danger', text: 'Delete', onclick: () => this.remove() }))),
      this.banner, this.transcript, form);
    this.onContextChange();
  }

  /** @param {string} state @param {string} text */
  pill(state, text) {
    this.statePill.dataset.state = state;
    this.statePill.textContent = text;
  }

  /**
   * A banner in the dock. Same-key banners replace each other.
   * @param {string} key @param {'info'|'warn'|'error'} kind @param {string} text @param {{label: string, run: () => void}} [action]
   */
  notice(key, kind, text, action) {
    this.clearNotice(key);
    const el = h('div', { class: ['notice', 'notice-' + kind], 'data-notice': key, role: kind === 'error' ? 'alert' : 'status' },
      h('span', { text }),
      action ? h('button', { type: 'button', class: 'small', text: action.label, onclick: action.run }) : null,
      h('button', { type: 'button', class: 'link', 'aria-label': 'Dismiss', text: '×', onclick: () => el.remove() }));
    this.banner.appendChild(el);
  }

  /** @param {string} key */
  clearNotice(key) {
    this.banner.querySelectorAll(`[data-notice="${key}"]`).forEach((n) => n.remove());
  }

  onContextChange() {
    if (!this.cockpit.route) return;
    const c = this.cockpit.contextSnapshot();
    this.contextChip.textContent = `Context sent with your message: ${this.cockpit.route.space.title} · ${c.route}`;
  }

  async open() {
    if (this.started) return;
    this.started = true;
    await this.refreshList();
    let id = null;
    try { id = localStorage.getItem(CONV_KEY); } catch { /* no storage */ }
    const pick = this.conversations.find((c) => c.id === id) || this.conversations.find((c) => c.status === 'active');
    if (pick) await this.select(pick.id);
    else this.renderEmpty();
  }

  hide() {
    // The stream keeps running while the dock is closed: a running turn's
    // effects still apply and get acknowledged.
  }

  stop() {
    if (this.stream) this.stream.stop();
    this.stream = null;
  }

  renderEmpty() {
    replace(this.transcript, h('li', { class: 'empty muted' }, 'No conversation yet. Ask something below: for example “show the failed runs” or “switch to dark mode”. The operator can move the cockpit and propose changes; nothing changes until you confirm.'));
  }

  async refreshList() {
    try {
      const r = await this.client.listConversations({ limit: 100 });
      this.conversations = r.conversations;
    } catch (e) {
      this.notice('list', 'error', `Conversations could not be loaded: ${errText(e)}`);
      return;
    }
    replace(this.convSelect,
      this.conversations.length === 0 ? h('option', { value: '', text: 'No conversations' }) : null,
      this.conversations.map((c) => h('option', {
        value: c.id, selected: this.conv ? c.id === this.conv.id : false,
        text: `${c.title || 'Untitled'}${c.status === 'archived' ? ' (archived)' : ''} · ${fmtTime(c.updatedAt)}`,
      })));
  }

  /** @param {string} id */
  async select(id) {
    if (!id) return;
    try { localStorage.setItem(CONV_KEY, id); } catch { /* no storage */ }
    await this.load(id);
  }

  async newConversation() {
    try {
      const c = await this.client.createConversation({});
      await this.refreshList();
      await this.select(c.id);
      this.input.focus();
      return c;
    } catch (e) {
      this.notice('conv', 'error', `New conversation failed: ${errText(e)}`);
      return null;
    }
  }

  async rename() {
    if (!this.conv) return;
    const title = await this.promptDialog('Rename conversation', 'Title', this.conv.title || '');
    if (title === null) return;
    try {
      this.conv = await this.client.updateConversation(this.conv.id, { title: title.trim() });
      await this.refreshList();
    } catch (e) {
      this.notice('conv', 'error', `Rename failed: ${errText(e)}`);
    }
  }

  async archive() {
    if (!this.conv) return;
    const to = this.conv.status === 'archived' ? 'active' : 'archived';
    try {
      this.conv = await this.client.updateConversation(this.conv.id, { status: to });
      await this.refreshList();
      this.updateComposer();
    } catch (e) {
      this.notice('conv', 'error', `${to === 'archived' ? 'Archive' : 'Unarchive'} failed: ${errText(e)}`);
    }
  }

  async remove() {
    if (!this.conv) return;
    const c = this.conv;
    if (!(await this.cockpit.confirmDialog({ title: 'Delete this conversation?', body: `“${c.title || 'Untitled'}” disappears from the dock. An administrator can recover it for a while before maintenance purges it.`, confirm: 'Delete', danger: true }))) return;
    try {
      await this.client.deleteConversation(c.id);
      this.stop();
      this.conv = null;
      try { localStorage.removeItem(CONV_KEY); } catch { /* no storage */ }
      await this.refreshList();
      const next = this.conversations.find((x) => x.status === 'active');
      if (next) await this.select(next.id);
      else this.renderEmpty();
    } catch (e) {
      this.notice('conv', 'error', `Delete failed: ${errText(e)}`);
    }
  }

  /** @param {string} title @param {string} label @param {string} value @returns {Promise<string | null>} */
  promptDialog(title, label, value) {
    return new Promise((resolve) => {
      const id = uid('prompt');
      const input = h('input', { id, value, maxlength: '200' });
      const dlg = h('dialog', { class: 'dialog', 'aria-label': title },
        h('form', { method: 'dialog' }, h('h2', { text: title }), h('div', { class: 'field' }, h('label', { for: id, text: label }), input),
          // Cancel is not a submit button: Enter in the field saves.
          h('div', { class: 'actions' }, h('button', { type: 'button', value: 'cancel', text: 'Cancel', onclick: () => dlg.close('cancel') }), h('button', { value: 'ok', class: 'primary', text: 'Save' }))));
      dlg.addEventListener('close', () => { resolve(dlg.returnValue === 'ok' ? input.value : null); dlg.remove(); });
      document.body.appendChild(dlg);
      dlg.showModal();
      input.select();
    });
  }

  // --- loading and streaming ---------------------------------------------

  /** Opens a conversation: renders its history, then follows it live. @param {string} id */
  async load(id) {
    const seq = ++this.openSeq;
    this.stop();
    this.resetTranscript();
    this.banner.replaceChildren();
    this.pill('connecting', 'Loading…');
    const stored = this.cursors.get(id);
    /** @type {Frame[]} */
    const frames = [];
    let after = 0;
    /** @type {Conversation | null} */
    let conv = null;
    let tail = 0;
    try {
      for (;;) {
        let page;
        try {
          page = await this.client.getConversation(id, after, 500);
        } catch (e) {
          if (e instanceof ApiError && e.code === 'replay_gap' && Number.isInteger(e.details.earliestAfterSequence) && e.details.earliestAfterSequence > after) {
            this.notice('gap', 'warn', `Frames up to #${e.details.earliestAfterSequence} of this conversation were purged; showing what is retained.`);
            after = e.details.earliestAfterSequence;
            continue;
          }
          throw e;
        }
        conv = page.conversation;
        tail = page.latestSequence;
        for (const raw of page.frames) frames.push(parseFrame(raw));
        if (!page.hasMore || page.frames.length === 0) break;
        after = page.nextAfterSequence;
      }
    } catch (e) {
      if (seq !== this.openSeq) return;
      this.pill('failed', 'Not loaded');
      if (e instanceof FrameError) this.protocolError(e);
      else this.notice('load', 'error', `The conversation could not be loaded: ${errText(e)}`, { label: 'Retry', run: () => this.load(id) });
      return;
    }
    if (seq !== this.openSeq || !conv) return;
    this.conv = conv;
    this.activeRequestId = conv.activeRequestId;
    this.lastSeq = 0;
    const lastRequest = frames.length ? frames[frames.length - 1].requestId : null;
    /** @type {Frame[]} */
    const deferred = [];
    for (const f of frames) {
      const mode = f.sequence <= stored ? 'history' : 'catchup';
      if (f.type === 'ui_command' && mode === 'catchup') {
        this.renderFrame(f, mode);
        deferred.push(f);
      } else {
        await this.handleFrame(f, mode, false);
      }
    }
    // Catch-up effects run after the whole history is known: only the
    // newest turn's may still apply.
    for (const f of deferred) {
      if (seq !== this.openSeq) return;
      await this.handleEffect(f, 'catchup', f.requestId !== lastRequest);
    }
    this.cursors.advance(id, tail);
    this.lastSeq = Math.max(this.lastSeq, tail);
    this.updateComposer();
    this.refreshProposals(id);
    this.scrollDown();
    this.stream = new ConversationStream({ api: this.client.api, conversationId: id, cursors: this.cursors, after: tail }, {
      onFrame: (f) => this.handleFrame(f, 'live', true),
      onState: (s, info) => this.onStreamState(s, info),
      onNotice: (n) => this.notice('gap', 'warn', `Frames #${n.from + 1}–#${n.to} were purged on the server; replay resumed from #${n.to}.`),
      onError: (e) => {
        if (e instanceof FrameError) this.protocolError(e);
        else this.notice('stream', 'error', `The stream stopped: ${errText(e)}`, { label: 'Reconnect', run: () => this.stream && this.stream.reconnectNow() });
      },
    }).start();
  }

  /** @param {FrameError} e */
  protocolError(e) {
    this.notice('protocol', 'error', `Protocol error (${e.code}): ${e.message}. Nothing from that frame was applied; the stream stopped.`,
      { label: 'Reconnect', run: () => this.stream && this.stream.reconnectNow() });
  }

  /** @param {string} s @param {any} info */
  onStreamState(s, info) {
    switch (s) {
      case 'open':
        this.pill('open', 'Live');
        this.clearNotice('reconnect');
        break;
      case 'connecting':
        this.pill('connecting', 'Connecting…');
        break;
      case 'reconnecting': {
        const secs = info && info.delayMs ? ` in ${Math.ceil(info.delayMs / 1000)} s` : '';
        this.pill('reconnecting', 'Reconnecting…');
        if (info && info.delayMs !== undefined) {
          this.notice('reconnect', 'warn', `The stream dropped; reconnecting${secs} (attempt ${info.attempt}) and resuming after #${this.stream ? this.stream.cursor : this.lastSeq}. Nothing is resent.`,
            { label: 'Reconnect now', run: () => this.stream && this.stream.reconnectNow() });
        }
        break;
      }
      case 'failed':
        this.pill('failed', 'Stopped');
        break;
      case 'closed':
        this.pill('idle', 'Offline');
        break;
    }
  }

  async refreshProposals(/** @type {string} */ id) {
    try {
      const r = await this.client.listProposals(id);
      if (!this.conv || this.conv.id !== id) return;
      for (const p of r.proposals || []) {
        const card = this.proposals.get(p.id);
        if (!card || (card.final && !card.inferred)) continue;
        if (p.status && p.status !== 'pending' && p.status !== 'confirmed' && p.status !== 'executing') {
          card.setFinal(p.status, { result: p.result, error: p.errorCode ? { code: p.errorCode, message: 'recorded on the server' } : undefined });
        } else if (p.status === 'confirmed' || p.status === 'executing') {
          card.setState('confirmed');
        }
      }
    } catch {
      // The list is a refinement; the frames already tell the state.
    }
  }

  resetTranscript() {
    for (const c of this.proposals.values()) c.destroy();
    this.proposals = new Map();
    this.toolCalls = new Map();
    this.textBubble = null;
    this.finished = new Set();
    this.transcript.replaceChildren();
  }

  scrollDown() {
    this.transcript.scrollTop = this.transcript.scrollHeight;
  }

  /**
   * Handles one frame: renders it and, for a ui_command, decides about the effect.
   * @param {Frame} f @param {Mode} mode @param {boolean} scroll
   */
  async handleFrame(f, mode, scroll) {
    this.lastSeq = Math.max(this.lastSeq, f.sequence);
    this.renderFrame(f, mode);
    if (f.type === 'ui_command') await this.handleEffect(f, mode, false);
    if (scroll) this.scrollDown();
    if (mode === 'live') this.updateComposer();
  }

  /** @param {Frame} f @param {Mode} mode */
  renderFrame(f, mode) {
    const p = f.payload;
    const li = (/** @type {string} */ cls, /** @type {any[]} */ ...children) => {
      const el = h('li', { class: ['frame', cls], 'data-seq': String(f.sequence), 'data-request': f.requestId });
      append(el, children);
      this.transcript.appendChild(el);
      this.textBubble = null;
      return el;
    };
    switch (f.type) {
      case 'text':
        if (p.role === 'user') {
          li('msg user', h('span', { class: 'who visually-hidden', text: 'You: ' }), h('p', { text: p.content }));
          if (mode === 'live') this.activeRequestId = f.requestId;
          return;
        }
        if (this.textBubble && this.textBubble.requestId === f.requestId && this.transcript.lastElementChild === this.textBubble.el) {
          this.textBubble.text += p.content;
        } else {
          const el = li('msg assistant');
          this.textBubble = { requestId: f.requestId, el, text: p.content };
        }
        // Model text is parsed as Markdown into DOM nodes; never as HTML.
        if (p.format === 'markdown') this.textBubble.el.replaceChildren(renderMarkdown(parseMarkdown(this.textBubble.text)));
        else this.textBubble.el.replaceChildren(h('p', { text: this.textBubble.text }));
        return;
      case 'tool_call': {
        const d = h('details', { class: 'tool', 'data-call': p.callId },
          h('summary', null, icon('M22 19l-9-9a5 5 0 0 0-6-6l3 3-3 3-3-3a5 5 0 0 0 6 6l9 9z'), h('span', { text: ` ${p.tool}` }), h('span', { class: 'muted small', text: ` (${p.mode})` }), h('span', { class: 'tool-status muted small', text: ' · running' })),
          h('p', { class: 'small muted', text: 'Arguments' }), h('pre', { class: 'output', text: JSON.stringify(p.arguments, null, 2) }));
        this.toolCalls.set(p.callId, d);
        li('tool-frame', d);
        return;
      }
      case 'tool_result': {
        const d = this.toolCalls.get(p.callId);
        const body = p.ok ? JSON.stringify(p.result === undefined ? null : p.result, null, 2) : `${p.error.code}: ${p.error.message}`;
        const shown = body.length > 4000 ? body.slice(0, 4000) + '\n… (cut for display)' : body;
        const content = [h('p', { class: 'small muted', text: p.ok ? 'Result' : 'Error' }), h('pre', { class: ['output', p.ok ? '' : 'bad'], text: shown })];
        if (d) {
          const st = d.querySelector('.tool-status');
          if (st) {
            st.textContent = p.ok ? ' · done' : ` · failed (${p.error.code})`;
            st.classList.toggle('bad', !p.ok);
          }
          append(d, content);
        } else {
          li('tool-frame', h('details', { class: 'tool' }, h('summary', { text: `tool result ${p.callId}` }), content));
        }
        if (!p.ok && DEGRADED_CODES.includes(p.error.code)) this.degraded(p.error);
        this.textBubble = null;
        return;
      }
      case 'ui_command': {
        const el = li('effect', h('span', { class: 'effect-icon', 'aria-hidden': 'true' }, icon('M12 2 4 6v6c0 5 3.4 9.7 8 11 4.6-1.3 8-6 8-11V6z')),
          h('span', { class: 'effect-desc', text: describeEffect(p.effect) }),
          h('span', { class: 'effect-status', 'data-effect-status': 'pending', text: mode === 'history' ? '' : 'requested' }));
        el.dataset.effect = p.effectId;
        return;
      }
      case 'proposal': {
        const card = new ProposalCard({ client: this.client, conversationId: f.conversationId, proposal: p.proposal });
        this.proposals.set(p.proposal.id, card);
        li('proposal-frame', card.el);
        return;
      }
      case 'confirmation': {
        const card = this.proposals.get(p.proposalId);
        if (card) card.setState(p.state);
        return;
      }
      case 'error':
        li('error', h('div', { class: 'error-box', role: mode === 'live' ? 'alert' : undefined }, h('strong', { class: 'code', text: p.error.code }), h('span', { text: ' ' + p.error.message }),
          p.error.retryable ? h('span', { class: 'muted small', text: ' (retryable: send again when ready)' }) : null));
        if (DEGRADED_CODES.includes(p.error.code)) this.degraded(p.error);
        return;
      case 'done': {
        li('done muted small', `— ${p.outcome}`);
        this.finished.add(f.requestId);
        if (this.activeRequestId === f.requestId) this.activeRequestId = null;
        if (this.conv && this.conv.activeRequestId === f.requestId) this.conv.activeRequestId = null;
        for (const c of this.proposals.values()) if (!c.final && c.state === 'required' && mode !== 'live') c.tick();
        return;
      }
    }
  }

  /** @param {{code: string, message: string}} err */
  degraded(err) {
    this.notice('degraded', 'warn', `Durability degraded (${err.code}): ${err.message}. Read-only answers may continue; changes are refused until it recovers.`);
  }

  /**
   * Decides about one effect: already handled here (repeat the ack only),
   * not for this browser to apply (history, expired, superseded), or apply
   * it, remember it, then acknowledge it once.
   * @param {Frame} f @param {Mode} mode @param {boolean} superseded
   */
  async handleEffect(f, mode, superseded) {
    // Two tabs of the cockpit may follow the same conversation: a lock per
    // effect (Web Locks, shared by the origin's tabs) makes the check of the
    // effect log and the application one step, so only one tab applies it.
    const locks = globalThis.navigator && navigator.locks;
    if (locks && mode !== 'history') {
      await locks.request('studio.effect.' + f.payload.effectId, () => this.decideEffect(f, mode, superseded));
      return;
    }
    await this.decideEffect(f, mode, superseded);
  }

  /** @param {Frame} f @param {Mode} mode @param {boolean} superseded */
  async decideEffect(f, mode, superseded) {
    const p = f.payload;
    const el = /** @type {HTMLElement | null} */ (this.transcript.querySelector(`[data-effect="${CSS.escape(p.effectId)}"]`));
    const show = (/** @type {string} */ state, /** @type {string} */ text) => {
      const st = el && /** @type {HTMLElement | null} */ (el.querySelector('.effect-status'));
      if (st) {
        st.dataset.effectStatus = state;
        st.textContent = text;
      }
    };
    const rec = this.effects.get(p.effectId);
    if (rec) {
      show(rec.status, rec.status === 'applied' ? 'applied' : rec.status === 'rejected' ? `rejected (${rec.rejectionCode})` : 'not applied');
      if (!rec.acked && rec.status !== 'skipped') await this.ack(f, rec, show);
      return;
    }
    if (mode === 'history') {
      show('not-applied', 'not applied in this browser');
      return;
    }
    const stale = checkFresh(p, { nowSeconds: Date.now() / 1000, superseded });
    if (stale) {
      show('expired', `not applied: ${stale.reason}`);
      return;
    }
    const outcome = await this.cockpit.applyEffect(p.effect);
    /** @type {EffectRecord} */
    const r = outcome.status === 'applied'
      ? { status: 'applied', clientRoute: outcome.clientRoute, acked: false, at: Date.now(), conversationId: f.conversationId }
      : { status: 'rejected', rejectionCode: outcome.rejectionCode, acked: false, at: Date.now(), conversationId: f.conversationId };
    // Remembered before the acknowledgement: a reload never applies it twice.
    this.effects.put(p.effectId, r);
    if (outcome.status === 'applied') this.appliedCount++;
    show(r.status, outcome.status === 'applied' ? 'applied' : `rejected (${outcome.rejectionCode}): ${outcome.reason}`);
    await this.ack(f, r, show);
  }

  /**
   * Sends the one acknowledgement of an effect (repeats are identical).
   * @param {Frame} f @param {EffectRecord} rec @param {(state: string, text: string) => void} show
   */
  async ack(f, rec, show) {
    const id = f.payload.effectId;
    const body = rec.status === 'applied'
      ? { status: /** @type {const} */ ('applied'), clientRoute: /** @type {string} */ (rec.clientRoute) }
      : { status: /** @type {const} */ ('rejected'), rejectionCode: /** @type {string} */ (rec.rejectionCode) };
    try {
      await this.client.ackEffect(f.conversationId, id, body);
      this.effects.markAcked(id);
    } catch (e) {
      if (e instanceof ApiError && e.status !== 0 && !e.retryable) {
        // The server decided (expired, conflict, refused): repeating the same ack cannot change that.
        this.effects.markAcked(id);
        show(e.code === 'stale_context' ? 'expired' : 'ack-error', e.code === 'stale_context'
          ? `${rec.status === 'applied' ? 'applied here, but ' : ''}the server says it expired (stale_context)`
          : `acknowledgement refused: ${e.code}: ${e.message}`);
      } else {
        show('ack-pending', `${rec.status}; acknowledgement not delivered yet (${errText(e)}), it is repeated on reconnect`);
      }
    }
  }

  // --- composer --------------------------------------------------------------

  updateComposer() {
    const archived = !!this.conv && this.conv.status === 'archived';
    const running = !!this.activeRequestId;
    this.cancelBtn.hidden = !running;
    this.sendBtn.disabled = running || archived;
    this.input.disabled = archived;
    this.archiveBtn.textContent = archived ? 'Unarchive' : 'Archive';
    if (archived) this.input.placeholder = 'This conversation is archived: read-only. Unarchive it to continue.';
    else this.input.placeholder = running ? 'A turn is running… cancel it or wait.' : 'Ask the operator… (Enter sends, Shift+Enter for a new line)';
    this.root.classList.toggle('turn-running', running);
  }

  async send() {
    const instruction = this.input.value.trim();
    if (!instruction || this.sendBtn.disabled) return;
    this.composerStatus.textContent = '';
    this.sendBtn.disabled = true;
    try {
      if (!this.conv) {
        const c = await this.client.createConversation({ title: instruction.slice(0, 60) });
        await this.refreshList();
        await this.select(c.id);
      } else if (!this.conv.title) {
        this.client.updateConversation(this.conv.id, { title: instruction.slice(0, 60) }).then(() => this.refreshList()).catch(() => {});
      }
      const conv = /** @type {Conversation} */ (this.conv);
      const acc = await this.client.submitTurn(conv.id, instruction, this.cockpit.contextSnapshot(), this.lastSeq);
      // The stream may have delivered the whole turn before this answer.
      if (!this.finished.has(acc.requestId)) this.activeRequestId = acc.requestId;
      this.input.value = '';
      this.updateComposer();
    } catch (e) {
      if (e instanceof ApiError && e.code === 'stale_context') {
        this.composerStatus.textContent = 'The conversation changed since you last saw it (another tab or turn added to it). It was refreshed below; your message was not sent. Review it and send again.';
        if (this.conv) await this.load(this.conv.id);
      } else if (e instanceof ApiError && e.code === 'conflict') {
        this.composerStatus.textContent = `A turn is still running in this conversation (${e.message}). Wait for it or cancel it; your message was not sent.`;
        if (this.conv) await this.load(this.conv.id);
      } else {
        this.composerStatus.textContent = `Not sent: ${errText(e)}`;
      }
    } finally {
      this.updateComposer();
    }
  }

  async cancelTurn() {
    if (!this.conv || !this.activeRequestId) return;
    this.cancelBtn.disabled = true;
    try {
      await this.client.cancel(this.conv.id, this.activeRequestId);
    } catch (e) {
      this.composerStatus.textContent = `Cancel failed: ${errText(e)}`;
    } finally {
      this.cancelBtn.disabled = false;
    }
  }
}

/** @param {unknown} e */
function errText(e) {
  if (e instanceof ApiError) return `${e.code}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}
