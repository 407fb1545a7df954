// History: finished runs and the audit trail. The server filters the trail
// by command, actor, target and time (bound to the URL) and pages it with
// a cursor. Each row shows who did what, the decision, and the target by
// name with a link to it (names are looked up in the application lists; a
// deleted target keeps the name its command carried); an operator's row
// opens its conversation and proposal in the dock.

import { h, replace, badge, fmtTime, fmtRelative, fmtDuration } from '../dom.js';
import { tabs, tabPanel, selectFilter, searchBox, table, runCells, shortId, paramValues, loading, errorBox, selectHref, linkTo, revealDetail, detailKeys, closeDetail } from './common.js';
import { runDetail } from './run-detail.js';
import { rangeFilter, RANGE_SECONDS } from './mission.js';
import { actorName, commandTitle } from '../words.js';

/**
 * @typedef {import('../app.js').SpaceContext} SpaceContext
 * @typedef {import('../appapi.js').AppApi} AppApi
 * @typedef {import('../appapi.js').AuditEvent} AuditEvent
 * @typedef {{kind: string, id: string, name: string, href: string | null}} Target
 */

const FINISHED = ['succeeded', 'failed', 'cancelled'];

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function mount(el, ctx) {
  const tab = ctx.route.params.tab || 'runs';
  const panel = tabPanel('tab', tab);
  el.append(tabs(ctx, 'tab', [{ value: 'runs', label: 'Finished runs' }, { value: 'audit', label: 'Audit trail' }], tab,
    () => ({ status: null, run: null, event: null, q: null, action: null, actor: null, target: null, range: null })), panel);
  if (tab === 'audit') return audit(panel, ctx);
  return runs(panel, ctx);
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function runs(el, ctx) {
  const p = ctx.route.params;
  const list = h('div', { class: 'list-pane' });
  const detail = h('div', { class: 'detail-pane' });
  el.append(h('div', { class: 'filters', role: 'search' }, selectFilter(ctx, 'status', 'Outcome', paramValues(ctx, 'status'), 'Any outcome'), searchBox(ctx, 'Search finished runs')),
    h('div', { class: p.run ? 'split' : 'single' }, list, detail));
  if (p.run) detail.appendChild(runDetail(ctx, p.run));
  replace(list, loading());
  ctx.app.listRuns({ status: p.status, q: p.q, limit: 200 }).then((page) => {
    if (!ctx.isCurrent()) return;
    const rows = page.runs.filter((r) => FINISHED.includes(r.status));
    replace(list, table({
      caption: 'Finished runs', rows, key: (r) => r.id, selected: p.run, onSelect: (r) => ctx.setParams({ run: r.id }),
      href: (r) => selectHref(ctx, { run: r.id }),
      empty: p.status || p.q ? 'No finished runs match.' : h('span', null, 'No finished runs yet. Runs show here once they end; launch one from the ', linkTo(ctx, '/library', 'Library'), '.'),
      columns: [
        { label: 'Outcome', cell: (r) => badge(r.status) },
        { label: 'Playbook', cell: (r) => r.playbookName, link: true, class: 'name' },
        { label: 'Ended', cell: (r) => (r.endedAt ? h('time', { datetime: new Date(r.endedAt * 1000).toISOString(), title: fmtTime(r.endedAt), text: fmtRelative(r.endedAt) }) : runCells(r).when), class: 'when' },
        { label: 'Duration', cell: (r) => fmtDuration(r.durationMs), class: 'num' },
        { label: 'Id', cell: (r) => shortId(r.id), class: 'hide-narrow' },
      ],
    }));
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
}

/** Where a target of a kind is shown in the cockpit. @type {Record<string, (id: string) => string>} */
const TARGET_ROUTES = {
  playbook: (id) => `/library?playbook=${encodeURIComponent(id)}`,
  workflow: (id) => `/designer?workflow=${encodeURIComponent(id)}`,
  schedule: (id) => `/schedules?schedule=${encodeURIComponent(id)}`,
  run: (id) => `/?view=fleet&run=${encodeURIComponent(id)}`,
};

/**
 * The kind and name of the current application resources, by id.
 * @param {AppApi} app
 * @returns {Promise<Map<string, {kind: string, name: string}>>}
 */
async function targetNames(app) {
  const [pbs, wfs, scs, rs] = await Promise.all([
    app.listPlaybooks({ limit: 200 }), app.listWorkflows({ limit: 200 }), app.listSchedules({ limit: 200 }), app.listRuns({ limit: 200 }),
  ]);
  const names = new Map();
  for (const x of pbs.playbooks) names.set(x.id, { kind: 'playbook', name: x.name });
  for (const x of wfs.workflows) names.set(x.id, { kind: 'workflow', name: x.name });
  for (const x of scs.schedules) names.set(x.id, { kind: 'schedule', name: x.name });
  for (const r of rs.runs) names.set(r.id, { kind: 'run', name: r.playbookName });
  return names;
}

/**
 * What an audit row acted on: its details' target (commands on a
 * resource), else the resource its target id names (a create, a
 * schedule's skipped slots).
 * @param {AuditEvent} e @param {Map<string, {kind: string, name: string}>} names
 * @returns {Target | null}
 */
function auditTarget(e, names) {
  const d = e.details || {};
  /** @type {{kind?: string, id?: string} | null} */
  let t = d.target || (d.result && d.result.target) || null;
  if (!t && e.targetId && names.has(e.targetId)) t = { kind: names.get(e.targetId)?.kind, id: e.targetId };
  if (!t && e.action === 'studio.schedule.skipped' && e.targetId) t = { kind: 'schedule', id: e.targetId };
  if (!t || !t.id || !t.kind) return null;
  const cmd = d.command || {};
  const carried = d.schedule || cmd.name || cmd[t.kind] || null;
  const known = names.get(t.id)?.name;
  const name = known || (typeof carried === 'string' && carried.length < 100 && carried !== t.id ? carried : null) || t.id.slice(0, 8);
  const route = TARGET_ROUTES[t.kind];
  // A target no longer listed may be gone: the link would lead nowhere.
  return { kind: t.kind, id: t.id, name, href: route !== undefined && known ? route(t.id) : null };
}

/**
 * The decision an audit row records: the operator's decision on a
 * proposal, or what a direct action did.
 * @param {AuditEvent} e
 */
function auditDecision(e) {
  const d = e.details || {};
  if (d.decision) return d.decision;
  switch (e.action) {
    case 'studio.app.command': return 'applied';
    case 'studio.schedule.skipped': return 'skipped';
    case 'studio.app.seeded': return 'created';
  }
  return '—';
}

/** @param {SpaceContext} ctx @param {Target | null} t */
function targetCell(ctx, t) {
  if (!t) return h('span', { class: 'muted', text: '—' });
  // A run is named by its playbook: "run of audit-repo".
  const label = [h('span', { class: 'muted small', text: t.kind === 'run' ? 'run of ' : t.kind + ' ' }), h('span', { class: 'name', text: t.name })];
  return t.href ? linkTo(ctx, t.href, ...label) : h('span', { title: t.id }, ...label);
}

/**
 * Who proposed and who decided, for an operator's row; who acted for the
 * others. Principals by name, the daemon's own actors in words.
 * @param {AuditEvent} e @param {Map<string, {submittedBy?: string, decidedBy?: string}>} proposals
 */
function whoText(e, proposals) {
  const d = e.details || {};
  const prop = d.proposal_id ? proposals.get(d.proposal_id) : null;
  if (!prop || !prop.submittedBy) return actorName(e.actor);
  const by = actorName(e.actor);
  return d.decision === 'confirmed' || d.decision === 'denied' || d.decision === 'executed' || d.decision === 'failed'
    ? `${by}, proposed by ${actorName(prop.submittedBy)}` : `${by} (proposed by ${actorName(prop.submittedBy)})`;
}

/**
 * Who submitted the turn of each proposal, by proposal id (best effort:
 * without it the rows name only who acted).
 * @param {SpaceContext} ctx
 */
async function proposalPeople(ctx) {
  /** @type {Map<string, {submittedBy?: string, decidedBy?: string}>} */
  const out = new Map();
  try {
    const r = await ctx.cockpit.api.get('/api/operator/proposals');
    for (const p of r.proposals || []) out.set(p.id, { submittedBy: p.submittedBy, decidedBy: p.decidedBy });
  } catch { /* the rows still name who acted */ }
  return out;
}

/** The audit trail's filters, bound to the URL: action, actor, target, time. @param {SpaceContext} ctx */
function auditFilters(ctx) {
  const p = ctx.route.params;
  const id = 'audit-target';
  /** @type {any} */
  let t = null;
  const target = /** @type {HTMLInputElement} */ (h('input', {
    id, type: 'search', name: 'target', value: p.target || '', placeholder: 'Target id', autocomplete: 'off', spellcheck: 'false',
    oninput: () => { clearTimeout(t); t = setTimeout(() => ctx.setParams({ target: target.value.trim() || null, event: null }, { replace: true }), 400); },
  }));
  const actor = selectFilter(ctx, 'actor', 'Actor', paramValues(ctx, 'actor'), 'Anyone');
  actor.querySelectorAll('option').forEach((o) => { if (o.value) o.textContent = actorName(o.value); });
  const command = selectFilter(ctx, 'action', 'Command', paramValues(ctx, 'action'), 'Any command');
  command.querySelectorAll('option').forEach((o) => { if (o.value) o.textContent = commandTitle(o.value); });
  return h('div', { class: 'filters', role: 'search' },
    command,
    actor,
    rangeFilter(ctx),
    h('div', { class: 'field inline' }, h('label', { for: id, text: 'Target' }), target),
    p.action || p.actor || p.target || p.range ? h('button', { type: 'button', class: 'link', text: 'Clear filters', onclick: () => ctx.setParams({ action: null, actor: null, target: null, range: null, event: null }) }) : null);
}

/**
 * Links of an operator's audit row: the conversation (the dock opens on it)
 * and the proposal in it.
 * @param {SpaceContext} ctx @param {AuditEvent} e
 */
function operatorLinks(ctx, e) {
  // The audit details are snake_case (docs/design.md §10).
  const d = e.details || {};
  const conv = d.conversation_id;
  const prop = d.proposal_id;
  if (!conv) return null;
  return h('button', {
    type: 'button', class: 'link small', 'data-open-conversation': conv, 'data-proposal': prop || '',
    text: prop ? 'Open its proposal in the dock' : 'Open the conversation in the dock',
    title: `Conversation ${conv}${prop ? `, proposal ${prop}` : ''}`,
    onclick: () => ctx.cockpit.openConversation(conv, prop),
  });
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function audit(el, ctx) {
  const p = ctx.route.params;
  const list = h('div', { class: 'list-pane' });
  const detail = h('div', { class: 'detail-pane' });
  el.append(auditFilters(ctx), h('div', { class: p.event ? 'split' : 'single' }, list, detail));
  replace(list, loading());
  const since = p.range && RANGE_SECONDS[p.range] ? String(Math.floor(Date.now() / 1000 - RANGE_SECONDS[p.range])) : undefined;
  /** @type {string | undefined} */
  let cursor;
  /** @type {{e: AuditEvent, target: Target | null, decision: string}[]} */
  const rows = [];
  /** @type {Map<string, {kind: string, name: string}>} */
  let names = new Map();
  /** @type {Map<string, {submittedBy?: string, decidedBy?: string}>} */
  let people = new Map();
  const more = async () => {
    const page = await ctx.app.audit({ commandType: p.action, actor: p.actor, target: p.target, since, limit: 100, cursor });
    cursor = page.nextCursor || undefined;
    rows.push(...page.events.map((e) => ({ e, target: auditTarget(e, names), decision: auditDecision(e) })));
  };
  const show = () => {
    replace(list, h('p', { class: 'muted small', role: 'status', text: `${rows.length} event${rows.length === 1 ? '' : 's'}${cursor ? ', more are older' : ''}` }),
      table({
        caption: 'Audit trail', rows, key: (r) => String(r.e.id), selected: p.event, onSelect: (r) => ctx.setParams({ event: String(r.e.id) }),
        href: (r) => selectHref(ctx, { event: String(r.e.id) }),
        empty: 'No audit events match.',
        columns: [
          { label: 'When', cell: (r) => h('time', { datetime: new Date(r.e.createdAt * 1000).toISOString(), title: fmtTime(r.e.createdAt), text: fmtRelative(r.e.createdAt) }), link: true, class: 'when' },
          { label: 'Who', cell: (r) => h('span', { 'data-who': '', text: whoText(r.e, people) }), class: 'hide-narrow' },
          { label: 'Command', cell: (r) => { const code = (r.e.details && (r.e.details.commandType || r.e.details.command_type)) || r.e.action; return h('span', { class: 'name', title: code, text: commandTitle(code) }); } },
          { label: 'Decision', cell: (r) => h('span', { class: ['decision', 'decision-' + r.decision], 'data-decision': r.decision, text: r.decision }) },
          { label: 'Target', cell: (r) => [targetCell(ctx, r.target), r.e.details && r.e.details.conversation_id ? [h('br'), operatorLinks(ctx, r.e)] : null] },
        ],
      }),
      cursor ? h('button', { type: 'button', class: 'more', 'data-more': '', text: 'Show older events', onclick: async () => { try { await more(); show(); } catch (e) { replace(list, errorBox(e)); } } }) : null);
    const sel = p.event ? rows.find((r) => String(r.e.id) === p.event) : null;
    if (p.event) {
      const ev = p.event;
      replace(detail, sel ? h('section', { class: 'card detail', 'aria-labelledby': 'event-title' },
        h('header', { class: 'detail-head' }, h('h2', { id: 'event-title', text: `Event ${sel.e.id}` }), h('span', { title: sel.e.action, text: commandTitle(sel.e.action) })),
        h('dl', { class: 'facts' },
          h('dt', { text: 'When' }), h('dd', { text: fmtTime(sel.e.createdAt) }),
          h('dt', { text: 'Who' }), h('dd', { 'data-who': '', text: whoText(sel.e, people) }),
          h('dt', { text: 'Decision' }), h('dd', { text: sel.decision }),
          h('dt', { text: 'Target' }), h('dd', null, targetCell(ctx, sel.target), sel.target ? [' ', shortId(sel.target.id)] : null),
          sel.e.details && sel.e.details.conversation_id ? [h('dt', { text: 'Operator' }), h('dd', null, operatorLinks(ctx, sel.e))] : null),
        h('h3', { text: 'Details' }), h('pre', { class: 'output', tabindex: '0', text: JSON.stringify(sel.e.details, null, 2) }),
        h('button', { type: 'button', class: 'link', text: 'Close', 'aria-keyshortcuts': 'Escape', onclick: () => closeDetail(ctx, 'event', ev) }))
        : errorBox(new Error(`audit event ${p.event} is not among those shown; clear the filters or show older events`)));
      const shown = /** @type {HTMLElement | null} */ (detail.querySelector('.detail'));
      if (shown) {
        detailKeys(shown, ctx, 'event', ev);
        revealDetail(shown);
      }
    }
  };
  Promise.all([targetNames(ctx.app), ctx.app.audit({ commandType: p.action, actor: p.actor, target: p.target, since, limit: 100 }), proposalPeople(ctx)]).then(([n, page, pp]) => {
    if (!ctx.isCurrent()) return;
    names = n;
    people = pp;
    cursor = page.nextCursor || undefined;
    rows.push(...page.events.map((e) => ({ e, target: auditTarget(e, names), decision: auditDecision(e) })));
    show();
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
}
