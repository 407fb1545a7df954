// The operator dock: puts together the conversation list, the transcript,
// the composer and the effect runner, opens a conversation (its history,
// then its live stream) and shows the stream's state. The cockpit never
// depends on it: the spaces work with the dock closed.

import { h, replace, icon } from '../dom.js';
import { ApiError, errorText } from '../api.js';
import { FrameError, parseFrame } from '../frames.js';
import { CursorStore, defaultStorage } from '../storage.js';
import { ConversationStream } from '../stream.js';
import { ProgressLine } from './progress.js';
import { Transcript } from './transcript.js';
import { EffectRunner } from './effect-runner.js';
import { Composer } from './composer.js';
import { ConversationList } from './conversations.js';
import { openAmend } from './amend.js';
import { Sheet } from './sheet.js';

/**
 * @typedef {import('../frames.js').Frame} Frame
 * @typedef {import('../frames.js').Conversation} Conversation
 * @typedef {import('../app.js').Cockpit} Cockpit
 * @typedef {import('../stream.js').StreamState} StreamState
 * @typedef {import('./transcript.js').Mode} Mode
 */

const CONV_KEY = 'studio.conversation';

export class Dock {
  /** @param {HTMLElement} root @param {Cockpit} cockpit */
  constructor(root, cockpit) {
    this.root = root;
    this.cockpit = cockpit;
    this.client = cockpit.operator;
    const storage = defaultStorage();
    this.cursors = new CursorStore(storage);
    this.started = false;
    /** @type {Promise<void> | null} */
    this.opening = null;
    /** @type {Conversation | null} */
    this.conv = null;
    /** @type {ConversationStream | null} */
    this.stream = null;
    this.lastSeq = 0;
    /** @type {string | null} */
    this.activeRequestId = null;
    this.openSeq = 0;
    /** @type {Set<string>} requests whose done frame arrived */
    this.finished = new Set();
    /** the conversation's first message: an untitled one is named by it */
    this.firstInstruction = '';

    this.statePill = h('span', { class: 'pill', 'data-state': 'idle', role: 'status', text: 'Not connected' });
    this.banner = h('div', { class: 'dock-banners' });
    // One polite live region for the transcript: finished pieces, not deltas.
    this.announcer = h('div', { class: 'visually-hidden', role: 'status', 'aria-live': 'polite', 'data-announcer': '' });
    this.transcript = new Transcript({
      client: this.client, registry: () => cockpit.registry, announce: (t) => this.announce(t),
      onDegraded: (err) => this.notice('degraded', 'warn', `Durability degraded (${err.code}): ${err.message}. Read-only answers may continue; changes are refused until it recovers.`),
      onFork: (seq) => this.fork(seq),
      copiedThrough: () => (this.conv && this.conv.forkedFrom ? this.conv.forkedFrom.copiedThrough : 0),
      onAmend: (card) => this.conv && openAmend({ client: this.client, conversationId: this.conv.id, schemaOf: (t) => this.schemaOf(t) }, card),
      me: () => cockpit.me,
      onProposal: (card) => this.learnProposal(card),
    });
    /** @type {Promise<Map<string, any>> | null} the tool catalog's input schemas, by command type */
    this.schemas = null;
    this.effects = new EffectRunner({
      client: this.client, storage, apply: (e) => cockpit.applyEffect(e),
      show: (id, state, text, live) => this.transcript.showEffect(id, state, text, live),
    });
    this.composer = new Composer({ onSend: (_, whenBusy) => this.send(whenBusy), onCancel: () => this.cancelTurn() });
    this.progress = new ProgressLine({ announce: (t) => this.announce(t) });
    this.list = new ConversationList({
      client: this.client, current: () => this.conv, onSelect: (id) => this.select(id), onNew: () => this.startNew(),
      waiting: () => (cockpit.inbox ? cockpit.inbox.waiting : new Map()),
      onChanged: (c) => { this.conv = c; this.updateComposer(); },
      onDeleted: (id) => this.afterDelete(id),
      notice: (t) => this.notice('conv', 'error', t),
      may: (a) => cockpit.may(a),
    });
    this.sheet = new Sheet({ app: cockpit.root, dock: this.root, convs: this.list.el });
    this.closeBtn = h('button', { type: 'button', class: 'icon-button', 'data-action': 'close-dock', 'aria-label': 'Close the dock', 'aria-keyshortcuts': 'Escape', title: 'Close (Esc)', onclick: () => this.cockpit.closeDock() }, icon('M6.4 5 5 6.4 10.6 12 5 17.6 6.4 19l5.6-5.6 5.6 5.6 1.4-1.4-5.6-5.6L19 6.4 17.6 5 12 10.6z'));
    replace(this.root,
      this.sheet.grip,
      h('header', { class: 'dock-head' },
        h('h2', { text: 'Operator' }), this.statePill, this.sheet.convsBtn, this.sheet.minBtn, this.closeBtn),
      this.list.el, this.banner, this.transcript.el, this.progress.el, this.composer.el, this.announcer);
    this.onContextChange();
  }

  /** Moves focus into the dock: the message box, else its Close button. */
  focus() {
    if (!this.composer.input.disabled) this.composer.focus();
    else this.closeBtn.focus();
  }

  /** Effects applied by this page since it loaded (tests read it). */
  get appliedCount() { return this.effects.appliedCount; }

  /** @param {string} text */
  announce(text) {
    // A new node per message: a rapid second message does not swallow the first.
    this.announcer.appendChild(h('p', { text }));
    while (this.announcer.childElementCount > 3) this.announcer.firstElementChild?.remove();
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
    this.composer.setContext(`Context sent with your message: ${this.cockpit.route.space.title} · ${c.route}`);
    // While a turn runs, the operator's view is reported so get_current_view
    // sees where they are now. Best effort: a lost report costs freshness only.
    if (this.conv && this.activeRequestId) this.client.reportView(this.conv.id, c, Date.now() / 1000).catch(() => {});
  }

  /** The input schema of a command type, from the tool catalog (read once). @param {string} commandType */
  async schemaOf(commandType) {
    if (!this.schemas) {
      this.schemas = this.client.tools().then((r) => new Map(r.tools.map((t) => [t.id, t.inputSchema])));
      this.schemas.catch(() => { this.schemas = null; });
    }
    return (await this.schemas).get(commandType) || null;
  }

  /** Forks the current conversation after the turn that ends at sequence. @param {number} sequence */
  async fork(sequence) {
    const src = this.conv;
    if (!src) return;
    try {
      const page = await this.client.forkConversation(src.id, { upToSequence: sequence });
      await this.list.refresh();
      await this.select(page.conversation.id);
      this.notice('fork', 'info', `Forked “${src.title || 'Untitled'}” after #${sequence}. Its copied proposals and effects are history: decide or apply them in the original.`);
    } catch (e) {
      this.notice('fork', 'error', `Fork failed: ${errorText(e)}`);
    }
  }

  /** Starts the dock once: the remembered conversation, else the newest active one. */
  open() {
    if (!this.opening) {
      this.started = true;
      this.opening = (async () => {
        await Promise.all([this.list.refresh(), this.list.loadModels()]);
        let id = null;
        try { id = localStorage.getItem(CONV_KEY); } catch { /* no storage */ }
        const pick = this.list.items.find((c) => c.id === id) || this.list.items.find((c) => c.status === 'active');
        if (pick) await this.select(pick.id);
        else this.renderEmpty();
      })();
    }
    return this.opening;
  }

  /**
   * Shows a conversation (and scrolls a proposal of it into view).
   * @param {string} id @param {string} [proposalId]
   */
  async show(id, proposalId) {
    try { localStorage.setItem(CONV_KEY, id); } catch { /* no storage */ }
    await this.open();
    if (!this.conv || this.conv.id !== id) await this.select(id);
    if (!proposalId) return;
    const card = /** @type {HTMLElement | null} */ (this.transcript.el.querySelector(`[data-proposal="${CSS.escape(proposalId)}"]`));
    if (card) {
      this.transcript.reveal(card);
      card.classList.add('highlight');
    }
  }

  hide() {
    // The stream keeps running while the dock is closed: a running turn's
    // effects still apply and get acknowledged.
  }

  stop() {
    if (this.stream) this.stream.stop();
    this.stream = null;
  }

  /**
   * Clears the dock for a new conversation: nothing is created until its
   * first message is sent (an empty "Untitled" one never stays behind).
   */
  startNew() {
    this.openSeq++;
    this.stop();
    this.conv = null;
    this.activeRequestId = null;
    this.firstInstruction = '';
    try { localStorage.removeItem(CONV_KEY); } catch { /* no storage */ }
    this.transcript.reset();
    this.banner.replaceChildren();
    this.progress.set(null);
    this.pill('idle', 'New');
    this.list.select.value = '';
    this.list.sync();
    this.transcript.empty(h('span', { text: 'A new conversation: it starts with your first message, which also names it.' }));
    this.updateComposer();
    this.composer.focus();
  }

  renderEmpty() {
    this.transcript.empty(h('span', { text: 'No conversation yet. Ask something below: for example “show the failed runs” or “switch to dark mode”. The operator can move the cockpit and propose changes; nothing changes until you confirm.' }));
  }

  /** @param {string} id */
  async select(id) {
    if (!id) return;
    try { localStorage.setItem(CONV_KEY, id); } catch { /* no storage */ }
    await this.load(id);
  }

  /** @param {string} id */
  async afterDelete(id) {
    if (this.conv && this.conv.id === id) {
      this.stop();
      this.conv = null;
    }
    try { localStorage.removeItem(CONV_KEY); } catch { /* no storage */ }
    await this.list.refresh();
    const next = this.list.items.find((x) => x.status === 'active');
    if (next) await this.select(next.id);
    else this.renderEmpty();
  }

  // --- loading and streaming ---------------------------------------------

  /** Opens a conversation: renders its history, then follows it live. @param {string} id */
  async load(id) {
    const seq = ++this.openSeq;
    this.stop();
    this.transcript.reset();
    this.finished = new Set();
    this.firstInstruction = '';
    this.banner.replaceChildren();
    this.pill('connecting', 'Loading…');
    const stored = this.cursors.get(id);
    /** @type {Frame[]} */
    const frames = [];
    let after = 0;
    /** @type {Conversation | null} */
    let conv = null;
    let tail = 0;
    /** @type {any} */
    let activeTurn = null;
    this.progress.set(null);
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
        activeTurn = page.activeTurn || null;
        for (const raw of page.frames) frames.push(parseFrame(raw));
        if (!page.hasMore || page.frames.length === 0) break;
        after = page.nextAfterSequence;
      }
    } catch (e) {
      if (seq !== this.openSeq) return;
      this.pill('failed', 'Not loaded');
      if (e instanceof FrameError) this.protocolError(e);
      else this.notice('load', 'error', `The conversation could not be loaded: ${errorText(e)}`, { label: 'Retry', run: () => this.load(id) });
      return;
    }
    if (seq !== this.openSeq || !conv) return;
    this.conv = conv;
    this.list.markCurrent();
    this.activeRequestId = conv.activeRequestId;
    this.lastSeq = 0;
    const lastRequest = frames.length ? frames[frames.length - 1].requestId : null;
    /** @type {Frame[]} */
    const deferred = [];
    // A fork's copied frames are history: their effects never apply again.
    const copied = conv.forkedFrom ? conv.forkedFrom.copiedThrough : 0;
    for (const f of frames) {
      /** @type {Mode} */
      const mode = f.sequence <= Math.max(stored, copied) ? 'history' : 'catchup';
      if (f.type === 'ui_command' && mode === 'catchup') {
        this.render(f, mode);
        deferred.push(f);
      } else {
        await this.handleFrame(f, mode, false);
      }
    }
    // Catch-up effects run after the whole history is known: only the
    // newest turn's may still apply.
    for (const f of deferred) {
      if (seq !== this.openSeq) return;
      await this.effect(f, 'catchup', f.requestId !== lastRequest);
    }
    this.cursors.advance(id, tail);
    this.lastSeq = Math.max(this.lastSeq, tail);
    this.updateComposer();
    this.refreshProposals(id);
    if (conv.activeRequestId) this.progress.set(activeTurn);
    this.transcript.scrollDown();
    this.stream = new ConversationStream({ api: this.client.api, conversationId: id, cursors: this.cursors, after: tail }, {
      onFrame: (f) => this.handleFrame(f, 'live', true),
      onState: (s, info) => this.onStreamState(s, info),
      onStatus: (p) => { if (seq === this.openSeq) { this.progress.set(p); this.updateComposer(); } },
      onNotice: (n) => this.notice('gap', 'warn', `Frames #${n.from + 1}–#${n.to} were purged on the server; replay resumed from #${n.to}.`),
      onError: (e) => {
        if (e instanceof FrameError) this.protocolError(e);
        else this.notice('stream', 'error', `The stream stopped: ${errorText(e)}`, { label: 'Reconnect', run: () => this.stream && this.stream.reconnectNow() });
      },
    }).start();
  }

  /** @param {FrameError} e */
  protocolError(e) {
    this.notice('protocol', 'error', `Protocol error (${e.code}): ${e.message}. Nothing from that frame was applied; the stream stopped.`,
      { label: 'Reconnect', run: () => this.stream && this.stream.reconnectNow() });
  }

  /** @param {StreamState} s @param {{attempt?: number, delayMs?: number} | undefined} info */
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

  /** Brings proposal cards up to the server's record (a decision taken elsewhere). @param {string} id */
  async refreshProposals(id) {
    try {
      const r = await this.client.listProposals(id);
      if (!this.conv || this.conv.id !== id) return;
      for (const p of r.proposals || []) {
        const card = this.transcript.proposals.get(p.id);
        if (card) card.learn(p);
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

  /**
   * Learns who proposed a card that arrived live (the proposal frame does
   * not say; the server's record does): four-eyes depends on it.
   * @param {import('./proposal.js').ProposalCard} card
   */
  async learnProposal(card) {
    const conv = this.conv;
    if (!conv) return;
    try {
      card.learn(await this.client.getProposal(conv.id, card.p.id));
    } catch {
      // The confirm still answers for itself (403 second_approver_required).
    }
  }

  /**
   * Hands an effect to the runner, unless the signed-in role may not
   * acknowledge effects (a viewer, an agent): its browser watches, and the
   * row says why nothing was applied here.
   * @param {Frame} f @param {Mode} mode @param {boolean} superseded
   */
  async effect(f, mode, superseded) {
    const v = this.cockpit.may('acknowledgeEffect');
    if (!v.allowed) {
      if (f.type === 'ui_command') this.transcript.showEffect(f.payload.effectId, 'skipped', `not applied in this browser: applying the operator's requests ${v.reason.charAt(0).toLowerCase()}${v.reason.slice(1)}`);
      return;
    }
    await this.effects.handle(f, mode, superseded);
  }

  /** @param {Frame} f @param {Mode} mode */
  render(f, mode) {
    this.transcript.render(f, mode);
    if (f.type === 'text' && f.payload.role === 'user' && !this.firstInstruction) this.firstInstruction = String(f.payload.content || '');
    if (f.type === 'text' && f.payload.role === 'user' && mode === 'live') this.activeRequestId = f.requestId;
    if (f.type === 'done') {
      this.finished.add(f.requestId);
      this.progress.ended(f.requestId);
      if (this.activeRequestId === f.requestId) this.activeRequestId = null;
      if (this.conv && this.conv.activeRequestId === f.requestId) this.conv.activeRequestId = null;
    }
  }

  /**
   * Handles one frame: renders it and, for a ui_command, decides about the effect.
   * @param {Frame} f @param {Mode} mode @param {boolean} scroll
   */
  async handleFrame(f, mode, scroll) {
    this.lastSeq = Math.max(this.lastSeq, f.sequence);
    this.render(f, mode);
    if (f.type === 'ui_command') await this.effect(f, mode, false);
    if (scroll) this.transcript.scrollDown();
    if (mode === 'live') this.updateComposer();
  }

  // --- composer --------------------------------------------------------------

  updateComposer() {
    const archived = !!this.conv && this.conv.status === 'archived';
    const running = !!this.activeRequestId;
    const v = this.cockpit.may('converse');
    const awaiting = running && !!this.progress.p && this.progress.p.state === 'awaiting_confirmation';
    // A person's approval request: no model turn to stop while it waits.
    const request = awaiting && [...this.transcript.proposals.values()].some((c) => c.request && !c.final && c.requestId === this.activeRequestId);
    this.composer.update({ running, archived, denied: v.allowed ? '' : v.reason, awaiting, request });
    this.progress.setRequest(request);
    this.list.sync();
    this.root.classList.toggle('turn-running', running);
  }

  /** @param {'enqueue'|'interrupt'} [whenBusy] what the message does while a turn runs */
  async send(whenBusy) {
    const instruction = this.composer.input.value.trim();
    if (!instruction || !this.composer.ready) return;
    this.composer.say('');
    this.composer.setBusy(true);
    try {
      let conv = this.conv;
      let expected = this.lastSeq;
      if (!conv) {
        // The new conversation is the one to send to, loaded or not: its
        // load may still be under way (or superseded by another), so
        // this.conv can be unset when create returns.
        const created = await this.list.create({ title: titleOf(instruction) });
        if (!created) return; // the list said why
        conv = created;
        expected = 0;
      } else if (!conv.title) {
        // An untitled conversation is named by its first message, once:
        // later messages never rename it.
        const untitled = conv;
        const title = titleOf(this.firstInstruction || instruction);
        untitled.title = title;
        this.client.updateConversation(untitled.id, { title }).then(() => this.list.refresh()).catch(() => { untitled.title = ''; });
      }
      const acc = await this.client.submitTurn(conv.id, instruction, this.cockpit.contextSnapshot(), expected, whenBusy);
      // A message that waits behind the running turn becomes active with
      // its instruction frame; one that runs now may have been streamed
      // whole before this answer.
      if (!acc.waiting && !this.finished.has(acc.requestId)) this.activeRequestId = acc.requestId;
      this.composer.clear();
    } catch (e) {
      if (e instanceof ApiError && e.code === 'stale_context') {
        this.composer.say('The conversation changed since you last saw it (another tab or turn added to it). It was refreshed below; your message was not sent. Review it and send again.');
        if (this.conv) await this.load(this.conv.id);
      } else if (e instanceof ApiError && e.code === 'conflict') {
        this.composer.say(whenBusy
          ? `Your message could not wait behind the running turn (${e.message}); it was not sent.`
          : `A turn is still running in this conversation (${e.message}). Send it after this turn or stop the turn; your message was not sent.`);
        if (this.conv) await this.load(this.conv.id);
      } else {
        this.composer.say(`Not sent: ${errorText(e)}`);
      }
    } finally {
      this.updateComposer();
    }
  }

  async cancelTurn() {
    if (!this.conv || !this.activeRequestId) return;
    this.composer.cancelBtn.disabled = true;
    try {
      await this.client.cancel(this.conv.id, this.activeRequestId);
    } catch (e) {
      this.composer.say(`Cancel failed: ${errorText(e)}`);
    } finally {
      this.composer.cancelBtn.disabled = false;
    }
  }
}

/**
 * A conversation's title from a message: its first line, at most 60
 * characters, cut at a word.
 * @param {string} text
 */
export function titleOf(text) {
  const line = text.trim().split('\n')[0].trim();
  if (line.length <= 60) return line;
  const cut = line.slice(0, 60);
  const space = cut.lastIndexOf(' ');
  return (space > 30 ? cut.slice(0, space) : cut) + '…';
}
