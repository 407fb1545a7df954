// The transcript of one conversation: each frame rendered once, in order.
// Assistant text streams into one bubble per run of text frames through the
// incremental Markdown view (model text never becomes HTML); tool calls and
// their results are expandable rows; effects are rows whose status the
// effect runner updates; proposals are cards. New content is announced
// politely to screen readers, one message per finished piece, not per delta.

import { h, append, icon } from '../dom.js';
import { MarkdownView } from '../markdown.js';
import { ProposalCard } from './proposal.js';
import { commandTitle, errorSentence } from '../words.js';

/** What a tool call's mode means, in words: a draft tool proposes (a change a person confirms, or an effect the page applies). @type {Record<string, string>} */
const MODE_WORDS = { read: 'reads', draft: 'proposes' };

/**
 * @typedef {import('../frames.js').Frame} Frame
 * @typedef {import('../frames.js').Effect} Effect
 * @typedef {import('../operator-api.js').OperatorClient} OperatorClient
 * @typedef {import('../router.js').Registry} Registry
 * @typedef {'history'|'catchup'|'live'} Mode
 */

/** Failures that mean the daemon's durability is degraded. */
const DEGRADED_CODES = ['audit_unavailable', 'service_failure'];

/**
 * What an effect asks for, in words, with the registry's titles.
 * @param {Effect} e @param {Registry | null} reg
 */
function describeEffect(e, reg) {
  const title = (/** @type {string | undefined} */ id) => (reg && id && reg.space(id)?.title) || String(id);
  switch (e.kind) {
    case 'navigate': {
      const params = { ...(e.params || {}) };
      let where = title(e.space);
      if (e.space === 'mission' && params.view === 'fleet') {
        where = 'the fleet';
        delete params.view;
      }
      const rest = Object.entries(params).map(([k, v]) => `${k} ${v}`).join(', ');
      return `Open ${where}${rest ? ` (${rest})` : ''}`;
    }
    case 'select':
      return `Select ${Object.entries(e.selection || {}).map(([k, v]) => `${k} ${v}`).join(', ')} in ${title(e.space)}`;
    case 'prefill':
      return `Fill in the ${e.form} form (${Object.keys(e.values || {}).join(', ')})`;
    case 'theme':
      return `Switch to the ${e.theme} theme`;
  }
  return `Unknown effect “${e.kind}”`;
}

export class Transcript {
  /**
   * @param {{client: OperatorClient, registry: () => Registry | null, announce: (text: string) => void, onDegraded: (err: {code: string, message: string}) => void,
   *   onFork?: (sequence: number) => void, copiedThrough?: () => number, onAmend?: (card: ProposalCard) => void,
   *   me?: () => import('../roles.js').Me | null, onProposal?: (card: ProposalCard) => void}} o
   * me is who is signed in; onProposal learns who proposed a card shown live.
   * onFork adds "Fork from here" to each turn's end; frames up to copiedThrough are a fork's copied history.
   */
  constructor(o) {
    this.o = o;
    this.el = h('ol', { class: 'transcript', 'aria-label': 'Conversation transcript', tabindex: '0' });
    /** @type {Map<string, ProposalCard>} */ this.proposals = new Map();
    /** @type {Map<string, HTMLDetailsElement>} */ this.toolCalls = new Map();
    /** The card of each proposing tool call: its tool_result is the command's result. */
    /** @type {Map<string, ProposalCard>} */ this.cardByCall = new Map();
    /** @type {string} */ this.lastCall = '';
    /** @type {{requestId: string, el: HTMLElement, view: MarkdownView | null, text: string, live: boolean} | null} */ this.bubble = null;
    // The end stays in view while the reader is there: a card that grows
    // after it was drawn (who proposed it, learned from the server) or a
    // progress line that takes the transcript's room would otherwise push
    // a waiting proposal's buttons out of sight. A reader who scrolled up
    // stays where they are.
    this.atEnd = true;
    this.lastTop = 0;
    this.el.addEventListener('scroll', () => {
      // Only a move up leaves the end: a scroll event that lands after
      // the content grew under it is no reader's.
      if (this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 8) this.atEnd = true;
      else if (this.el.scrollTop < this.lastTop) this.atEnd = false;
      this.lastTop = this.el.scrollTop;
    });
    const follow = () => { if (this.atEnd) this.scrollDown(); };
    new ResizeObserver(follow).observe(this.el);
    // Attributes too: hidden, open and the cards' states change heights.
    new MutationObserver(follow).observe(this.el, { childList: true, subtree: true, characterData: true, attributes: true });
  }

  reset() {
    for (const c of this.proposals.values()) c.destroy();
    this.proposals = new Map();
    this.toolCalls = new Map();
    this.cardByCall = new Map();
    this.lastCall = '';
    this.bubble = null;
    this.el.replaceChildren();
  }

  /** @param {Node} content */
  empty(content) {
    this.reset();
    this.el.appendChild(h('li', { class: 'empty muted' }, content));
  }

  scrollDown() {
    this.el.scrollTop = this.el.scrollHeight;
  }

  /** Scrolls an item to the middle, where the reader is now (the end no longer follows). @param {Element} item */
  reveal(item) {
    this.atEnd = false;
    item.scrollIntoView({ block: 'center' });
  }

  /** Closes the current text bubble, announcing it when it was live. */
  closeBubble() {
    const b = this.bubble;
    this.bubble = null;
    if (b && b.live && b.text.trim()) this.o.announce('Operator: ' + b.text.trim().slice(0, 500));
  }

  /**
   * @param {Frame} f @param {string} cls @param {...any} children
   * @returns {HTMLElement}
   */
  row(f, cls, ...children) {
    this.closeBubble();
    const el = h('li', { class: ['frame', cls], 'data-seq': String(f.sequence), 'data-request': f.requestId });
    append(el, children);
    this.el.appendChild(el);
    return el;
  }

  /** The effect row of an effect id, if rendered. @param {string} effectId */
  effectStatus(effectId) {
    const row = /** @type {HTMLElement | null} */ (this.el.querySelector(`[data-effect="${CSS.escape(effectId)}"]`));
    return row && /** @type {HTMLElement | null} */ (row.querySelector('.effect-status'));
  }

  /**
   * Shows an effect's state beside its request.
   * @param {string} effectId @param {string} state @param {string} text @param {boolean} [live]
   */
  showEffect(effectId, state, text, live = false) {
    const st = this.effectStatus(effectId);
    if (!st) return;
    st.dataset.effectStatus = state;
    st.textContent = text;
    if (live) this.o.announce(`${st.parentElement?.querySelector('.effect-desc')?.textContent || 'Request'}: ${text}`);
  }

  /** @param {Frame} f @param {Mode} mode */
  render(f, mode) {
    const p = f.payload;
    const live = mode === 'live';
    switch (f.type) {
      case 'text': {
        if (p.role === 'user') {
          this.row(f, 'msg user', h('span', { class: 'who visually-hidden', text: 'You: ' }), h('p', { text: p.content }));
          return;
        }
        let b = this.bubble;
        if (!b || b.requestId !== f.requestId || this.el.lastElementChild !== b.el) {
          const el = this.row(f, 'msg assistant');
          b = this.bubble = { requestId: f.requestId, el, view: p.format === 'markdown' ? new MarkdownView(el) : null, text: '', live };
        }
        b.text += p.content;
        b.live = b.live || live;
        // Model text is parsed as Markdown into DOM nodes; never as HTML.
        if (b.view) b.view.append(p.content);
        else b.el.replaceChildren(h('p', { text: b.text }));
        return;
      }
      case 'tool_call': {
        const d = h('details', { class: 'tool', 'data-call': p.callId },
          h('summary', null, icon('M22 19l-9-9a5 5 0 0 0-6-6l3 3-3 3-3-3a5 5 0 0 0 6 6l9 9z'), h('span', { title: p.tool, text: ` ${commandTitle(p.tool)}` }), h('span', { class: 'muted small', text: ` · ${MODE_WORDS[p.mode] || p.mode}` }), h('span', { class: 'tool-status muted small', text: ' · running' })),
          h('p', { class: 'small muted', text: 'Arguments' }), h('pre', { class: 'output', tabindex: '0', text: JSON.stringify(p.arguments, null, 2) }));
        this.toolCalls.set(p.callId, d);
        this.lastCall = p.callId;
        this.row(f, 'tool-frame', d);
        return;
      }
      case 'tool_result': {
        const card = this.cardByCall.get(p.callId);
        // An executed command's result may say that nothing changed.
        if (card && p.ok && card.state === 'executed') card.setFinal('executed', { result: p.result });
        const d = this.toolCalls.get(p.callId);
        const body = p.ok ? JSON.stringify(p.result === undefined ? null : p.result, null, 2) : `${errorSentence(p.error)} (${p.error.code})`;
        const shown = body.length > 4000 ? body.slice(0, 4000) + '\n… (cut for display)' : body;
        const content = [h('p', { class: 'small muted', text: p.ok ? 'Result' : 'Error' }), h('pre', { class: ['output', p.ok ? '' : 'bad'], tabindex: '0', text: shown })];
        if (d) {
          const st = d.querySelector('.tool-status');
          if (st) {
            st.textContent = p.ok ? ' · done' : ` · failed (${p.error.code})`;
            st.classList.toggle('bad', !p.ok);
          }
          append(d, content);
          this.closeBubble();
        } else {
          this.row(f, 'tool-frame', h('details', { class: 'tool' }, h('summary', { text: 'A tool’s result' }), content));
        }
        if (!p.ok && DEGRADED_CODES.includes(p.error.code)) this.o.onDegraded(p.error);
        return;
      }
      case 'ui_command': {
        const el = this.row(f, 'effect', h('span', { class: 'effect-icon', 'aria-hidden': 'true' }, icon('M12 2 4 6v6c0 5 3.4 9.7 8 11 4.6-1.3 8-6 8-11V6z')),
          h('span', { class: 'effect-desc', text: describeEffect(p.effect, this.o.registry()) }),
          h('span', { class: 'effect-status', 'data-effect-status': 'pending', text: mode === 'history' ? '' : 'requested' }));
        el.dataset.effect = p.effectId;
        return;
      }
      case 'proposal': {
        const copied = this.o.copiedThrough ? f.sequence <= this.o.copiedThrough() : false;
        const card = new ProposalCard({
          client: this.o.client, conversationId: f.conversationId, requestId: f.requestId, proposal: p.proposal,
          historical: copied ? 'Copied from the conversation this one was forked from: it can be decided only there.' : undefined,
          onAmend: copied ? undefined : this.o.onAmend, me: this.o.me,
        });
        this.proposals.set(p.proposal.id, card);
        if (this.lastCall) this.cardByCall.set(this.lastCall, card);
        this.row(f, 'proposal-frame', card.el);
        if (live && !copied && this.o.onProposal) this.o.onProposal(card);
        if (live) this.o.announce(`${card.request ? 'Approval request' : 'Proposal'} waiting for a decision: ${p.proposal.summary}`);
        return;
      }
      case 'confirmation': {
        const card = this.proposals.get(p.proposalId);
        if (card) card.setState(p.state, p.decidedBy);
        return;
      }
      case 'error':
        this.row(f, 'error', h('div', { class: 'error-box', role: live ? 'alert' : undefined }, h('strong', { class: 'code', text: p.error.code }), h('span', { text: ' ' + p.error.message }),
          p.error.retryable ? h('span', { class: 'muted small', text: ' (retryable: send again when ready)' }) : null));
        if (DEGRADED_CODES.includes(p.error.code)) this.o.onDegraded(p.error);
        return;
      case 'done': {
        const onFork = this.o.onFork;
        this.row(f, 'done muted small', `— ${p.outcome}`,
          onFork ? h('button', { type: 'button', class: 'link small', 'data-action': 'fork', 'data-seq': String(f.sequence), text: 'Fork from here', onclick: () => onFork(f.sequence) }) : null);
        if (live) this.o.announce(`The operator's turn ${p.outcome === 'completed' ? 'is complete' : 'ended: ' + p.outcome}.`);
        for (const c of this.proposals.values()) if (!c.final && c.state === 'required' && !live) c.tick();
      }
    }
  }
}
