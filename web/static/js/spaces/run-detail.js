// The detail of one run: a timeline (queued → started → finished, with the
// wait and the run time), the output (refreshed while the run is queued or
// running), the input and arguments, the playbook and the version it ran,
// retry history, and the audit rows that launched or changed it. Cancel and
// retry act on it. Used by Mission → Fleet and History.

import { h, replace, badge, fmtDuration } from '../dom.js';
import { fmtTime, fmtRelative } from '../time.js';
import { confirmDialog } from '../dialogs.js';
import { runRelations } from '../insights.js';
import { loading, errorBox } from './loading.js';
import { linkTo, selectHref } from './links.js';
import { revealDetail, detailKeys, closeDetail } from './table.js';
import { shortId } from './cells.js';
import { ApiError, showError } from '../api.js';
import { actorName, commandTitle, errorSentence } from '../words.js';

/** A run's trigger in words. @type {Record<string, string>} */
const TRIGGER_WORDS = { manual: 'by hand', operator: 'a confirmed operator proposal', schedule: 'a schedule' };

/** How a run came to be queued, in the timeline's words. @type {Record<string, string>} */
const TRIGGER_NOTE = { manual: 'launched by hand', operator: 'proposed in the dock, confirmed by a person', schedule: 'by its schedule' };

/**
 * @typedef {import('../app.js').SpaceContext} SpaceContext
 * @typedef {import('../appapi.js').Run} Run
 * @typedef {import('../appapi.js').AuditEvent} AuditEvent
 */

/** How often a queued or running run is read again, in milliseconds. */
const REFRESH_MS = 1500;

/** @param {Run} r */
const inFlight = (r) => r.status === 'queued' || r.status === 'running';

/**
 * The timeline of a run as list items: each step with its time and the
 * time since the previous one.
 * @param {Run} r @param {number} nowSeconds
 */
function timeline(r, nowSeconds) {
  const ended = r.endedAt !== null && r.endedAt !== undefined;
  /** @type {{key: string, label: string, at: number | null, note: string}[]} */
  const steps = [
    { key: 'queued', label: 'Queued', at: r.createdAt, note: TRIGGER_NOTE[r.trigger] || `by ${r.trigger}` },
    {
      key: 'started', label: 'Started', at: r.startedAt,
      note: r.startedAt ? `waited ${fmtDuration(Math.round((r.startedAt - r.createdAt) * 1000))}`
        : ended ? 'never started' : `waiting for ${fmtDuration(Math.round((nowSeconds - r.createdAt) * 1000))}`,
    },
    {
      key: 'finished', label: ended ? `Finished: ${r.status}` : 'Finished', at: r.endedAt,
      note: ended ? (r.startedAt ? `ran ${fmtDuration(r.durationMs ?? Math.round(((r.endedAt || 0) - r.startedAt) * 1000))}` : '')
        : r.startedAt ? `running for ${fmtDuration(Math.round((nowSeconds - r.startedAt) * 1000))}` : '',
    },
  ];
  return h('ol', { class: 'timeline', 'aria-label': 'Timeline' }, steps.map((s) => h('li', {
    class: ['step', s.at ? 'done' : 'pending', s.key === 'finished' && ended ? 'step-' + r.status : ''], 'data-step': s.key,
  }, h('span', { class: 'step-label', text: s.label }),
  s.at ? h('time', { datetime: new Date(s.at * 1000).toISOString(), title: fmtTime(s.at), text: fmtTime(s.at) }) : h('span', { class: 'muted', text: '—' }),
  s.note ? h('span', { class: 'muted small step-note', text: s.note }) : null)));
}

/** What an audit row says happened, in a few words. @param {AuditEvent} e */
function auditSummary(e) {
  const d = e.details || {};
  const type = commandTitle(d.commandType || d.command_type || e.action);
  return d.decision ? `${type}: ${d.decision}` : type;
}

/**
 * Who launched a run, from its audit rows: the principal of the launch (a
 * person in the cockpit or at the command line), or, for a confirmed
 * proposal, who proposed it and who confirmed it.
 * @param {SpaceContext} ctx @param {AuditEvent[]} events oldest first or not
 * @returns {Promise<string>}
 */
async function launchedBy(ctx, events) {
  const sorted = [...events].sort((a, b) => a.createdAt - b.createdAt || a.id - b.id);
  const first = sorted[0];
  if (!first) return '';
  const d = first.details || {};
  if (d.proposal_id && d.conversation_id) {
    const confirmed = sorted.find((e) => e.details && e.details.decision === 'confirmed') || first;
    let proposer = '';
    try {
      const p = await ctx.cockpit.operator.getProposal(d.conversation_id, d.proposal_id);
      proposer = p.submittedBy || '';
    } catch { /* the confirmer is still known */ }
    return proposer ? `Proposed by ${actorName(proposer)} in the dock, confirmed by ${actorName(confirmed.actor)}` : `Confirmed in the dock by ${actorName(confirmed.actor)}`;
  }
  return `Launched by ${actorName(first.actor)}`;
}

/**
 * The detail panel of one run.
 * @param {SpaceContext} ctx @param {string} id
 */
export function runDetail(ctx, id) {
  const el = h('section', { class: 'detail card', 'aria-labelledby': 'run-title' });
  detailKeys(el, ctx, 'run', id);
  const related = h('div', { class: 'related' });
  /** @type {any} */
  let timer = null;
  let first = true;
  let relatedFor = '';
  const load = async () => {
    clearTimeout(timer);
    if (first) replace(el, loading());
    first = false;
    /** @type {Run} */
    let r;
    try {
      r = await ctx.app.getRun(id);
    } catch (e) {
      if (!ctx.isCurrent()) return;
      // A short id that starts several runs: each is offered.
      const matches = e instanceof ApiError && e.details.reason === 'ambiguous' && Array.isArray(e.details.matches) ? /** @type {string[]} */ (e.details.matches) : [];
      replace(el, errorBox(e),
        matches.length ? h('ul', { class: 'list', 'data-ambiguous': '' }, matches.map((m) => h('li', null, linkTo(ctx, selectHref(ctx, { run: m }), 'Run ', h('code', { class: 'id', text: m }))))) : null,
        h('button', { type: 'button', 'data-needs': 'read', text: 'Close', onclick: () => closeDetail(ctx, 'run', id) }));
      revealDetail(el);
      return;
    }
    if (!ctx.isCurrent()) return;
    // A short id in the address (a pasted link): the run's full id replaces it.
    if (r.id !== id) {
      ctx.cockpit.canonicalize({ run: r.id });
      id = r.id;
    }
    // A run in flight is read again until it ends.
    if (inFlight(r)) timer = setTimeout(() => ctx.isCurrent() && load(), REFRESH_MS);
    const status = h('p', { class: 'form-error', role: 'alert' });
    const actions = h('div', { class: 'actions' });
    if (inFlight(r)) {
      actions.appendChild(h('button', {
        type: 'button', class: 'danger', text: 'Cancel run',
        onclick: async () => {
          if (!(await confirmDialog({ title: 'Cancel this run?', body: `The run of ${r.playbookName} stops; its output so far is kept.`, confirm: 'Cancel run', danger: true }))) return;
          try { await ctx.app.cancelRun(r.id); load(); } catch (e) { showError(status, e); }
        },
      }));
    }
    if (r.status === 'failed' || r.status === 'cancelled') {
      actions.appendChild(h('button', {
        type: 'button', 'data-needs': 'change', text: 'Retry run',
        onclick: async () => {
          try {
            const nr = await ctx.app.retryRun(r.id);
            const newId = (nr && (nr.id || (nr.run && nr.run.id))) || null;
            ctx.cockpit.flash(`Retried ${r.playbookName}.`);
            ctx.cockpit.go(newId ? `/?view=fleet&run=${encodeURIComponent(newId)}` : '/?view=fleet');
          } catch (e) { showError(status, e); }
        },
      }));
    }
    actions.appendChild(h('button', { type: 'button', class: 'link', text: 'Close', 'aria-keyshortcuts': 'Escape', onclick: () => closeDetail(ctx, 'run', id) }));
    const args = Object.entries(r.args || {});
    const playbookHref = `/library?playbook=${encodeURIComponent(r.playbookId)}`;
    replace(el,
      h('header', { class: 'detail-head' },
        h('h2', { id: 'run-title' }, h('span', { class: 'name', text: r.playbookName }), ' ', shortId(r.id)),
        h('span', { role: 'status', 'data-run-status': r.status }, badge(r.status), inFlight(r) ? h('span', { class: 'muted small', text: ' · live' }) : null)),
      timeline(r, Date.now() / 1000),
      h('dl', { class: 'facts' },
        h('dt', { text: 'Playbook' }), h('dd', null, linkTo(ctx, playbookHref, h('span', { class: 'name', text: r.playbookName })), ` at version ${r.playbookVersion}`),
        h('dt', { text: 'Trigger' }), h('dd', { title: r.trigger }, TRIGGER_WORDS[r.trigger] || r.trigger, r.scheduleId ? [' (', linkTo(ctx, `/schedules?schedule=${encodeURIComponent(r.scheduleId)}`, 'its schedule'), ')'] : null),
        r.workflowId ? [h('dt', { text: 'Workflow' }), h('dd', { 'data-run-workflow': '' }, linkTo(ctx, `/designer?workflow=${encodeURIComponent(r.workflowId)}`, 'its workflow'), `, step ${(r.workflowStep ?? 0) + 1}`)] : null,
        h('dt', { text: 'Created' }), h('dd', { text: `${fmtTime(r.createdAt)} (${fmtRelative(r.createdAt)})` }),
        h('dt', { text: 'Input' }), h('dd', null, r.input ? h('pre', { class: 'output inline-output', text: r.input }) : '—'),
        h('dt', { text: 'Arguments' }), h('dd', null, args.length ? h('dl', { class: 'args' }, args.map(([k, v]) => [h('dt', null, h('code', { text: k })), h('dd', { text: v })])) : 'none')),
      r.error ? h('div', { class: 'error-box', role: 'note' }, h('span', { text: errorSentence(r.error) + ' ' }), h('small', { class: 'code', text: `(${r.error.code})` })) : null,
      h('h3', { id: 'run-output-title', text: 'Output' + (r.outputTruncated ? ' (truncated)' : '') }),
      h('pre', { class: 'output', tabindex: '0', 'aria-labelledby': 'run-output-title', 'data-run-output': '', text: r.output || (inFlight(r) ? 'No output yet.' : 'No output.') }),
      related, status, actions);
    revealDetail(el);
    // Relations change only when the run does: read them once per version.
    const key = `${r.id}@${r.version}`;
    if (relatedFor !== key) {
      relatedFor = key;
      showRelated(ctx, r, related);
    }
  };
  load();
  return el;
}

/** Retry history and audit rows of a run. @param {SpaceContext} ctx @param {Run} r @param {HTMLElement} el */
async function showRelated(ctx, r, el) {
  replace(el, loading('Finding retries and audit rows…'));
  let rel;
  try {
    rel = await runRelations(ctx.app, r);
  } catch (e) {
    if (ctx.isCurrent()) replace(el, errorBox(e));
    return;
  }
  if (!ctx.isCurrent() || !el.isConnected) return;
  const launched = h('p', { 'data-launched-by': '' });
  launchedBy(ctx, rel.events).then((t) => { launched.textContent = t ? t + '.' : ''; }).catch(() => {});
  const runLink = (/** @type {string} */ rid, /** @type {string} */ text) => linkTo(ctx, selectHref(ctx, { run: rid }), text, ' ', shortId(rid));
  replace(el,
    h('h3', { text: 'Retries' }),
    r.retryOf || rel.retries.length ? h('ul', { class: 'list', 'data-retries': '' },
      r.retryOf ? h('li', null, runLink(r.retryOf, 'Retry of run')) : null,
      rel.retries.map((x) => h('li', null, runLink(x.id, 'Retried as run'), ' ', badge(x.status)))) : h('p', { class: 'muted', text: 'Not a retry, and not retried.' }),
    h('h3', { text: 'Audit' }),
    launched,
    rel.events.length ? h('ul', { class: 'list', 'data-audit-rows': '' }, rel.events.map((e) => h('li', null,
      linkTo(ctx, `/history?tab=audit&event=${e.id}`, `Event ${e.id}`), ` · ${auditSummary(e)} by ${actorName(e.actor)} · `,
      h('time', { datetime: new Date(e.createdAt * 1000).toISOString(), text: fmtTime(e.createdAt) }))))
      : h('p', { class: 'muted', text: 'No audit rows name this run.' }));
}
