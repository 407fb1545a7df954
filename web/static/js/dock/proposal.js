// The proposal card (docs/design.md §9): what the human confirms. It shows the
// summary, the risk (execute and admin look different from mutate), the
// impact (destructive and irreversible in red, in words), the target by
// name and its version, the exact command as JSON, and a live expiry
// countdown. An irreversible proposal enables Confirm only once the
// target's name is typed. Confirm sends the command hash and target version
// the card shows; the result replaces the buttons. There is no auto-confirm.
// A result that changed nothing says so, never "Succeeded". A person's
// approval request (origin "request") was asked for directly, not proposed
// in a model's turn: its card says who asked, and its requester's Deny
// withdraws it. An amendment is its amender's own command: when four-eyes
// holds it for another approver, Edit says so before, and the amended card
// after.

import { h, replace, icon } from '../dom.js';
import { ApiError } from '../api.js';
import { mayConfirm, mayDeny, decisionReason, amendmentWaits } from '../roles.js';
import { riskText, commandTitle, actorName } from '../words.js';

/**
 * @typedef {import('../frames.js').CommandProposal} CommandProposal
 * @typedef {import('../operator-api.js').OperatorClient} OperatorClient
 * @typedef {import('../roles.js').Me} Me
 */

const RISK = {
  mutate: { label: riskText('mutate'), icon: 'M3 17.2V21h3.8L17.8 9.9l-3.8-3.8zM20.7 7a1 1 0 0 0 0-1.4l-2.3-2.3a1 1 0 0 0-1.4 0l-1.8 1.8 3.8 3.8z' },
  execute: { label: riskText('execute'), icon: 'M8 5v14l11-7z' },
  admin: { label: riskText('admin'), icon: 'M12 1 3 5v6c0 5.6 3.8 10.7 9 12 5.2-1.3 9-6.4 9-12V5zm-1 6h2v6h-2zm0 8h2v2h-2z' },
};

/** Impacts, as shown beside the risk. */
const IMPACT = {
  destructive: 'Destructive: loses work or data',
  irreversible: 'Irreversible: cannot be undone',
};

/** Confirmation states and results, as shown. */
const FINAL = {
  unchanged: { text: 'Nothing changed', cls: 'muted' },
  succeeded: { text: 'Succeeded', cls: 'ok' },
  executed: { text: 'Succeeded', cls: 'ok' },
  failed: { text: 'Failed', cls: 'bad' },
  conflict: { text: 'Conflict: the target changed or the request was stale; nothing ran', cls: 'bad' },
  expired: { text: 'Expired: nothing ran; ask again for a new proposal', cls: 'muted' },
  cancelled: { text: 'Denied: nothing ran', cls: 'muted' },
  denied: { text: 'Denied: nothing ran', cls: 'muted' },
  amended: { text: 'Amended: replaced by an edited command; this one did not run', cls: 'muted' },
};

/**
 * The target as a person reads it: its kind, its name when the command
 * names it, the id (in full on hover) and the version confirmed against.
 * @param {CommandProposal} p
 */
function targetText(p) {
  const t = /** @type {{kind: string, id: string, version: number | string}} */ (p.target);
  const named = p.targetName || p.command[t.kind];
  let name = typeof named === 'string' && named !== t.id ? named : null;
  const short = t.id.slice(0, 8);
  // A run's name is its playbook and short id ("audit-repo run bb6b9763"):
  // said once, as "run of audit-repo".
  const run = name && t.kind === 'run' ? /^(.*) run [0-9a-f]{8}$/.exec(name) : null;
  let label = name ? `${t.kind} ${name} ` : `${t.kind} `;
  if (run) label = `run of ${run[1]} `;
  else if (name && name.includes(short)) return [h('span', { class: 'name', title: t.id, text: `${t.kind} ${name}` }), ` at version ${t.version}`];
  return [name ? h('span', { class: 'name', text: label }) : label, h('code', { class: 'id', title: t.id, text: short }), ` at version ${t.version}`];
}

export class ProposalCard {
  /**
   * @param {{client: OperatorClient, conversationId: string, requestId?: string, proposal: CommandProposal, onResult?: (status: string) => void, onAmend?: (card: ProposalCard) => void, historical?: string, me?: () => Me | null}} o
   * onAmend adds "Edit arguments" (dock/amend.js); historical, a reason, shows the card without actions (a fork's copy);
   * me is who is signed in: the controls it may not use are disabled with the reason.
   */
  constructor(o) {
    this.o = o;
    this.p = o.proposal;
    /** the turn that proposed it */
    this.requestId = o.requestId || '';
    /** a person asked for it directly: no model turn proposed it */
    this.request = this.p.origin === 'request';
    /** @type {string} */
    this.state = 'required';
    this.final = false;
    // final only because the countdown ran out here: later frames or the
    // server's list may still say what really happened.
    this.inferred = false;
    this.confirmed = false;
    this.busy = false;
    /** @type {string} who submitted the turn that proposed it ('' until known) */
    this.submittedBy = '';
    /** @type {string} who confirmed or denied it */
    this.decidedBy = '';
    const p = this.p;
    const risk = RISK[p.risk] || RISK.mutate;
    this.countdown = h('span', { class: 'countdown', role: 'timer', 'aria-live': 'off' });
    this.status = h('div', { class: 'proposal-status', role: 'status', 'aria-live': 'polite' });
    this.confirmLabel = p.impact === 'irreversible' ? 'Confirm for good' : p.impact === 'destructive' ? 'Confirm, losing work' :
      p.risk === 'execute' ? 'Confirm and run' : p.risk === 'admin' ? 'Confirm admin action' : 'Confirm';
    this.confirmBtn = h('button', {
      type: 'button', class: ['primary', p.risk !== 'mutate' || p.impact ? 'danger' : ''], 'data-action': 'confirm',
      text: this.confirmLabel,
      onclick: () => this.confirm(),
    });
    this.denyBtn = h('button', { type: 'button', 'data-action': 'deny', text: 'Deny', onclick: () => this.deny() });
    this.amendBtn = o.onAmend ? h('button', { type: 'button', 'data-action': 'amend', text: 'Edit arguments', onclick: () => o.onAmend && o.onAmend(this) }) : null;
    /** whether the signed-in principal's amendment would wait for another approver (gate sets it) */
    this.amendWaits = false;
    // Why a control is disabled, said beside it (and tied to it for screen readers).
    this.why = h('p', { class: 'why-disabled small', id: 'why-' + p.id, 'data-why': '', hidden: true });
    this.actions = h('div', { class: 'actions' }, this.confirmBtn, this.amendBtn, this.denyBtn, this.why);
    // Irreversible: Confirm waits for the target's name, typed.
    this.mustType = p.impact === 'irreversible' ? (p.targetName || p.commandType) : '';
    /** @type {HTMLInputElement | null} */ this.typed = null;
    if (this.mustType) {
      const inputId = 'typed-' + p.id;
      this.typed = /** @type {HTMLInputElement} */ (h('input', { id: inputId, type: 'text', autocomplete: 'off', spellcheck: 'false', 'data-typed-confirm': '', oninput: () => this.gate() }));
      this.actions.prepend(h('p', { class: 'typed-confirm' },
        h('label', { for: inputId }, 'This cannot be undone. Type ', h('code', { text: this.mustType }), ' to confirm: '), this.typed));
    }
    const impact = p.impact && IMPACT[p.impact];
    const titleId = 'proposal-' + p.id;
    this.el = h('article', { class: ['proposal', 'risk-' + p.risk, p.impact ? 'impact-' + p.impact : ''], 'aria-labelledby': titleId, 'data-proposal': p.id, 'data-state': 'required', 'data-origin': this.request ? 'request' : 'turn' },
      h('header', { class: 'proposal-head' },
        h('span', { class: 'risk-badge', title: `Risk: ${p.risk}` }, icon(risk.icon), h('span', { text: risk.label })),
        this.countdown),
      impact ? h('p', { class: 'impact-badge', 'data-impact': p.impact, text: impact }) : null,
      h('h3', { id: titleId, class: 'proposal-summary', text: p.summary }),
      this.amendsNote = p.amends ? h('p', { class: 'muted small', 'data-amends': p.amends }) : null,
      this.people = h('p', { class: 'muted small proposal-people', 'data-people': '' }),
      h('dl', { class: 'facts' },
        h('dt', { text: 'Command' }), h('dd', { title: p.commandType, text: commandTitle(p.commandType) }),
        h('dt', { text: 'Target' }), h('dd', null, p.target ? targetText(p) : 'none (creates something new or acts on the system)'),
        h('dt', { text: 'Hash' }), h('dd', null, h('code', { title: p.commandHash, text: p.commandHash.slice(0, 16) + '…' }))),
      h('details', { class: 'command', open: true }, h('summary', { text: 'Exact command' }), h('pre', { class: 'output', tabindex: '0', text: JSON.stringify(p.command, null, 2) })),
      this.actions,
      this.status);
    if (o.historical) {
      // History: the copied frames may still tell its outcome (inferred
      // lets them), but nothing here can decide it.
      this.final = this.inferred = true;
      this.actions.remove();
      this.el.dataset.historical = 'true';
      this.status.before(h('p', { class: 'muted small historical-note', text: o.historical }));
      replace(this.status, h('p', { class: 'muted', 'data-result': 'historical', text: 'Not actionable here.' }));
      return;
    }
    this.tick();
    this.timer = setInterval(() => this.tick(), 1000);
    this.gate();
  }

  /**
   * Learns who proposed and who decided (the server's proposal view or a
   * confirmation frame) and shows it; four-eyes may now hold Confirm.
   * @param {{submittedBy?: string, decidedBy?: string}} v
   */
  learn(v) {
    if (v.submittedBy) this.submittedBy = v.submittedBy;
    if (v.decidedBy) this.decidedBy = v.decidedBy;
    const parts = [];
    if (this.submittedBy) parts.push(this.request ? `Approval requested by ${actorName(this.submittedBy)}` : `Proposed in a turn by ${actorName(this.submittedBy)}`);
    if (this.decidedBy) parts.push(`decided by ${actorName(this.decidedBy)}`);
    this.people.textContent = parts.length ? parts.join('; ') + '.' : '';
    if (this.submittedBy) this.el.dataset.submittedBy = this.submittedBy;
    if (this.decidedBy) this.el.dataset.decidedBy = this.decidedBy;
    this.gate();
  }

  /**
   * Enables Confirm and Deny as the signed-in principal may use them
   * (role, four-eyes) and, for an irreversible proposal, once the typed
   * name matches; a disabled control says why.
   */
  gate() {
    const me = this.o.me ? this.o.me() : null;
    const c = mayConfirm(me, { risk: this.p.risk, impact: this.p.impact, submittedBy: this.submittedBy });
    const d = mayDeny(me);
    let reason = decisionReason(me, { risk: this.p.risk, impact: this.p.impact, submittedBy: this.submittedBy });
    // The requester's own request: theirs to withdraw, another's to confirm.
    const mine = this.request && !!me && !!this.submittedBy && me.name === this.submittedBy;
    if (mine && !c.allowed && c.waiting) reason = 'Waiting for another approver: you asked for this, and this kind of change needs a second person to confirm it. You can withdraw your request.';
    this.denyBtn.textContent = mine ? 'Withdraw request' : 'Deny';
    this.el.dataset.waiting = !c.allowed && c.waiting ? 'another-approver' : '';
    this.why.hidden = !reason;
    this.why.textContent = reason;
    for (const [btn, ok] of /** @type {[HTMLButtonElement | null, boolean][]} */ ([[this.confirmBtn, c.allowed], [this.denyBtn, d.allowed], [this.amendBtn, d.allowed]])) {
      if (!btn) continue;
      if (ok) btn.removeAttribute('aria-describedby');
      else btn.setAttribute('aria-describedby', this.why.id);
    }
    this.denyBtn.disabled = this.busy || !d.allowed;
    if (this.amendBtn) this.amendBtn.disabled = this.busy || !d.allowed;
    if (this.typed) this.typed.disabled = !c.allowed;
    this.confirmBtn.disabled = this.busy || !c.allowed || (!!this.typed && this.typed.value.trim() !== this.mustType);
    if (!c.allowed && c.waiting) this.confirmBtn.textContent = 'Waiting for another approver';
    else this.confirmBtn.textContent = this.confirmLabel;
    this.amendWaits = amendmentWaits(me, { risk: this.p.risk, impact: this.p.impact });
    if (this.amendBtn) {
      this.amendBtn.textContent = this.amendWaits ? 'Edit and send for approval' : 'Edit arguments';
      this.amendBtn.title = this.amendWaits ? 'Your edited command becomes your own request: this kind of change needs another approver to confirm it, not you.' : '';
    }
    if (this.amendsNote) this.amendsNote.textContent = this.amendedText(me, c);
  }

  /**
   * What an amended proposal's card says of it: whose amendment it is and
   * who may now run it.
   * @param {Me | null} me @param {import('../roles.js').Verdict} c the signed-in principal's confirm
   */
  amendedText(me, c) {
    const by = this.submittedBy;
    // Until the server says whose it is, it is only an amendment.
    if (!by || !me) return `An amendment of an earlier proposal${c.allowed ? ': confirm it to run this command' : ''}.`;
    if (by === me.name) {
      return c.allowed === false && c.waiting
        ? 'Your amendment of an earlier proposal: this kind of change needs another approver, so it runs once someone else confirms it.'
        : 'Your amendment of an earlier proposal: confirm it to run this command.';
    }
    // Another's amendment: whoever else may confirm it is the second person four-eyes asks for.
    return `${actorName(by)}'s amendment of an earlier proposal${c.allowed ? ': confirm it to run this command' : ''}.`;
  }

  tick() {
    const left = Math.round(this.p.expiresAt - Date.now() / 1000);
    if (this.final) {
      this.countdown.textContent = '';
      clearInterval(this.timer);
      return;
    }
    if (left <= 0) {
      this.countdown.textContent = 'expired';
      if (!this.busy && !this.confirmed) this.setFinal('expired', {}, true);
      return;
    }
    const m = Math.floor(left / 60);
    const s = String(left % 60).padStart(2, '0');
    this.countdown.textContent = `expires in ${m}:${s}`;
    this.countdown.setAttribute('aria-label', `expires in ${m} minutes ${s} seconds`);
  }

  /** A confirmation frame's state. @param {string} state @param {string} [decidedBy] */
  setState(state, decidedBy) {
    if (decidedBy && state !== 'required') this.learn({ decidedBy });
    if (this.final && !this.inferred) return;
    this.state = state;
    if (state === 'required') return;
    this.el.dataset.state = state;
    if (state === 'confirmed') {
      this.confirmed = true;
      this.final = false;
      this.inferred = false;
      this.actions.remove();
      replace(this.status, h('p', { class: 'muted', text: 'Confirmed; executing…' }));
      return;
    }
    this.setFinal(state in FINAL ? state : 'unknown:' + state);
  }

  /**
   * Shows a terminal result in place of the buttons.
   * @param {string} status @param {{result?: unknown, error?: {code: string, message: string}}} [detail]
   * @param {boolean} [inferred] only the local countdown says so
   */
  setFinal(status, detail = {}, inferred = false) {
    // Frames say executed/denied, the confirm answer succeeded/cancelled: one outcome.
    status = status === 'executed' ? 'succeeded' : status === 'denied' ? 'cancelled' : status;
    const res = /** @type {{noChange?: boolean, message?: string} | null | undefined} */ (detail.result);
    if (status === 'succeeded' && res && typeof res === 'object' && res.noChange) status = 'unchanged';
    if (this.final && inferred) return;
    if (this.final && !this.inferred && !detail.result && !detail.error) return;
    this.final = true;
    this.inferred = inferred;
    clearInterval(this.timer);
    this.countdown.textContent = '';
    this.actions.remove();
    this.el.dataset.state = status;
    const f = /** @type {Record<string, {text: string, cls: string}>} */ (FINAL)[status] || { text: `Ended (${status.replace(/^unknown:/, '')}); treated as not applied`, cls: 'muted' };
    replace(this.status,
      h('p', { class: ['result', 'result-' + f.cls], 'data-result': status, text: status === 'unchanged' && res && res.message ? `Nothing changed: ${res.message.replace(/; nothing changed$/, '')}` : f.text }),
      detail.error ? h('p', { class: 'error-box' }, h('strong', { class: 'code', text: detail.error.code }), h('span', { text: ' ' + detail.error.message })) : null,
      detail.result !== undefined && detail.result !== null ? h('details', null, h('summary', { text: 'Result' }), h('pre', { class: 'output', text: JSON.stringify(detail.result, null, 2) })) : null);
    if (this.o.onResult) this.o.onResult(status);
  }

  async confirm() {
    if (this.busy || this.final) return;
    this.busy = true;
    this.confirmBtn.disabled = true;
    this.denyBtn.disabled = true;
    replace(this.status, h('p', { class: 'muted', text: 'Confirming…' }));
    try {
      const r = await this.o.client.confirmProposal(this.o.conversationId, this.p);
      this.setFinal(String(r.status), { result: r.result, error: r.error });
    } catch (e) {
      this.fail(e);
    } finally {
      this.busy = false;
      if (!this.final) this.gate();
    }
  }

  async deny() {
    if (this.busy || this.final) return;
    this.busy = true;
    this.confirmBtn.disabled = true;
    this.denyBtn.disabled = true;
    try {
      const r = await this.o.client.denyProposal(this.o.conversationId, this.p.id);
      this.setFinal(String((r && r.status) || 'cancelled'));
    } catch (e) {
      this.fail(e);
    } finally {
      this.busy = false;
      if (!this.final) this.gate();
    }
  }

  /** @param {unknown} e */
  fail(e) {
    // A refusal for role or four-eyes changes nothing: the card stays
    // decidable by someone else, and says why.
    if (e instanceof ApiError && e.code === 'denied') {
      this.gate();
      replace(this.status, h('p', { class: 'error-box', role: 'alert', text: e.details.reason === 'second_approver_required'
        ? 'Waiting for another approver: the daemon refused your confirm because you proposed this. Another person with the role must confirm it.'
        : `Refused: ${e.message}` }));
      return;
    }
    if (e instanceof ApiError && e.status !== 0) {
      const status = e.code === 'conflict' || e.code === 'stale_context' ? 'conflict' : e.code === 'not_found' ? 'failed' : e.retryable ? '' : 'failed';
      if (status) {
        this.setFinal(status, { error: { code: e.code, message: e.message } });
        return;
      }
    }
    // A network or retryable failure: nothing is known to have run; allow another try.
    this.gate();
    replace(this.status, h('p', { class: 'error-box', role: 'alert' }, h('strong', { class: 'code', text: e instanceof ApiError ? e.code : 'client_error' }), h('span', { text: ' ' + (e instanceof Error ? e.message : String(e)) + ' — you can try again.' })));
  }

  destroy() {
    clearInterval(this.timer);
  }
}
