// History: finished runs and the audit trail. The server filters the trail
// by command, actor, target and time (bound to the URL) and pages it with
// a cursor. Each row shows who did what, the decision, and the target by
// name with a link to it (names are looked up in the application lists; a
// deleted target keeps the name its command carried); an operator's row
// opens its conversation and proposal in the dock.

import { h, replace, badge, fmtDuration } from '../dom.js';
import { fmtTime, fmtRelative } from '../time.js';
import { loading, errorBox } from './loading.js';
import { tabs, tabPanel } from './tabs.js';
import { selectFilter, searchBox, paramValues, filterBar } from './filters.js';
import { selectHref, linkTo } from './links.js';
import { table, revealDetail, detailKeys, closeDetail } from './table.js';
import { runCells, shortId } from './cells.js';
import { keepPlace } from './keep-place.js';
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
  el.append(filterBar({ active: p.status ? 1 : 0, fields: [selectFilter(ctx, 'status', 'Outcome', paramValues(ctx, 'status'), 'Any outcome')], search: searchBox(ctx, 'Search finished runs') }),
    h('div', { class: p.run ? 'split' : 'single' }, list, detail));
  if (p.run) detail.appendChild(runDetail(ctx, p.run));
  replace(list, loading());
  const load = () => ctx.app.listRuns({ status: p.status, q: p.q, limit: 200 }).then((page) => {
    if (!ctx.isCurrent()) return;
    const rows = page.runs.filter((r) => FINISHED.includes(r.status));
    keepPlace(list, () => replace(list, table({
      caption: 'Finished runs', rows, compact: true, key: (r) => r.id, selected: p.run, onSelect: (r) => ctx.setParams({ run: r.id }),
      href: (r) => selectHref(ctx, { run: r.id }),
      empty: p.status || p.q ? 'No finished runs match.' : h('span', null, 'No finished runs yet. Runs show here once they end; launch one from the ', linkTo(ctx, '/library', 'Library'), '.'),
      columns: [
        { label: 'Outcome', cell: (r) => badge(r.status) },
        { label: 'Playbook', cell: (r) => r.playbookName, link: true, class: 'name' },
        { label: 'Ended', cell: (r) => (r.endedAt ? h('time', { datetime: new Date(r.endedAt * 1000).toISOString(), title: fmtTime(r.endedAt), text: fmtRelative(r.endedAt) }) : runCells(r).when), class: 'when' },
        { label: 'Duration', cell: (r) => fmtDuration(r.durationMs), class: 'num' },
        { label: 'Id', cell: (r) => shortId(r.id), class: 'hide-narrow' },
      ],
    })));
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
  load();
  // Runs that end anywhere show here without a reload.
  ctx.onChange(['run.changed', 'run.created'], load);
}

/** Where a target of a kind is shown in the cockpit. @type {Record<string, (id: string) => string>} */
const TARGET_ROUTES = {
  playbook: (id) => `/library?playbook=${encodeURIComponent(id)}`,
  workflow: (id) => `/designer?workflow=${encodeURIComponent(id)}`,
  schedule: (id) => `/schedules?schedule=${encodeURIComponent(id)}`,
  run: (id) => `/?view=fleet&run=${encodeURIComponent(id)}`,
};

/**
 * The kind and name of the current application resources and the
 * conversations one can see, by id.
 * @param {SpaceContext} ctx
 * @returns {Promise<Map<string, {kind: string, name: string}>>}
 */
async function targetNames(ctx) {
  const app = ctx.app;
  const [pbs, wfs, scs, rs, cs] = await Promise.all([
    app.listPlaybooks({ limit: 200 }), app.listWorkflows({ limit: 200 }), app.listSchedules({ limit: 200 }), app.listRuns({ limit: 200 }),
    ctx.cockpit.operator.listConversations({ limit: 100 }).catch(() => ({ conversations: [] })),
  ]);
  const names = new Map();
  for (const x of pbs.playbooks) names.set(x.id, { kind: 'playbook', name: x.name });
  for (const x of wfs.workflows) names.set(x.id, { kind: 'workflow', name: x.name });
  for (const x of scs.schedules) names.set(x.id, { kind: 'schedule', name: x.name });
  for (const r of rs.runs) names.set(r.id, { kind: 'run', name: r.playbookName });
  for (const c of /** @type {{id: string, title: string}[]} */ (cs.conversations)) names.set(c.id, { kind: 'conversation', name: c.title ? `“${c.title}”` : 'untitled' });
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
  // A turn or an acknowledged effect names its conversation.
  const conv = d.conversationId || (String(e.action).startsWith('studio.operator.') && !d.target ? d.conversation_id : null);
  if (conv && !d.target && !(d.result && d.result.target)) {
    const known = names.get(conv);
    return { kind: 'conversation', id: conv, name: known ? known.name : conv.slice(0, 8), href: null };
  }
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
  // A conversation's title is words, and wraps; names and ids do not.
  const label = [h('span', { class: 'muted small', text: t.kind === 'run' ? 'run of ' : t.kind + ' ' }), h('span', { class: t.kind === 'conversation' ? 'title' : 'name', text: t.name })];
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
  // Who the trail names: people by their principal, the daemon's own actors in words.
  const actor = selectFilter(ctx, 'actor', 'Who', p.actor ? [p.actor] : [], 'Anyone');
  const actorSel = /** @type {HTMLSelectElement} */ (actor.querySelector('select'));
  const label = () => actorSel.querySelectorAll('option').forEach((o) => { if (o.value) o.textContent = actorName(o.value); });
  label();
  ctx.app.auditActors().then((r) => {
    if (!ctx.isCurrent()) return;
    const people = r.actors.filter((a) => !a.startsWith('studio_'));
    const daemon = r.actors.filter((a) => a.startsWith('studio_'));
    const opt = (/** @type {string} */ a) => h('option', { value: a, text: actorName(a), selected: p.actor === a });
    replace(actorSel, h('option', { value: '', text: 'Anyone' }),
      people.length ? h('optgroup', { label: 'People' }, people.map(opt)) : null,
      daemon.length ? h('optgroup', { label: 'Studio itself' }, daemon.map(opt)) : null,
      p.actor && !r.actors.includes(p.actor) ? opt(p.actor) : null);
  }).catch(() => { /* the current value stays offered */ });
  const command = selectFilter(ctx, 'action', 'Command', paramValues(ctx, 'action'), 'Any command');
  command.querySelectorAll('option').forEach((o) => { if (o.value) o.textContent = commandTitle(o.value); });
  return filterBar({
    active: [p.action, p.actor, p.target, p.range].filter(Boolean).length,
    fields: [command, actor, rangeFilter(ctx), h('div', { class: 'field inline' }, h('label', { for: id, text: 'Target' }), target)],
    actions: [p.action || p.actor || p.target || p.range ? h('button', { type: 'button', class: 'link', 'data-needs': 'read', text: 'Clear filters', onclick: () => ctx.setParams({ action: null, actor: null, target: null, range: null, event: null }) }) : null],
  });
}

/**
 * Links of an operator's audit row: the conversation (the dock opens on it)
 * and the proposal in it.
 * @param {SpaceContext} ctx @param {AuditEvent} e
 */
function operatorLinks(ctx, e) {
  // The audit details are snake_case (docs/design.md §10).
  const d = e.details || {};
  // A turn's and an effect's rows spell it conversationId.
  const conv = d.conversation_id || d.conversationId;
  const prop = d.proposal_id;
  if (!conv) return null;
  return h('button', {
    type: 'button', class: 'link small', 'data-open-conversation': conv, 'data-proposal': prop || '',
    text: prop ? 'Open its proposal in the dock' : 'Open the conversation in the dock',
    title: `Conversation ${conv}${prop ? `, proposal ${prop}` : ''}`,
    onclick: () => ctx.cockpit.openConversation(conv, prop),
  });
}

/** The actions a person repeats in a conversation: their rows are grouped. */
const CHATTER = ['studio.operator.turn_submitted', 'studio.operator.effect_acknowledged'];

/**
 * @typedef {{e: AuditEvent, target: Target | null, decision: string}} AuditRow
 * @typedef {AuditRow & {count: number, oldest: AuditEvent}} AuditGroup one row, or consecutive turns of one person in one conversation
 */

/**
 * Groups consecutive rows (newest first) of the same person's turns (or
 * acknowledged effects) in one conversation, so a conversation does not
 * fill the top of the trail; every other row stands alone.
 * @param {AuditRow[]} rows
 * @returns {AuditGroup[]}
 */
export function groupChatter(rows) {
  /** @type {AuditGroup[]} */
  const out = [];
  for (const r of rows) {
    const last = out[out.length - 1];
    const conv = (/** @type {AuditEvent} */ e) => (e.details || {}).conversationId || (e.details || {}).conversation_id || '';
    if (last && CHATTER.includes(r.e.action) && last.e.action === r.e.action && last.e.actor === r.e.actor && conv(last.e) && conv(last.e) === conv(r.e)) {
      last.count++;
      last.oldest = r.e;
      continue;
    }
    out.push({ ...r, count: 1, oldest: r.e });
  }
  return out;
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function audit(el, ctx) {
  const p = ctx.route.params;
  const list = h('div', { class: 'list-pane' });
  const detail = h('div', { class: 'detail-pane' });
  el.append(auditFilters(ctx), h('div', { class: p.event ? 'split' : 'single' }, list, detail));
  replace(list, loading());
  const since = p.range && RANGE_SECONDS[p.range] ? String(Math.floor(Date.now() / 1000 - RANGE_SECONDS[p.range])) : undefined;
  const filter = { commandType: p.action, actor: p.actor, target: p.target, since, limit: 100 };
  /** @type {string | undefined} */
  let cursor;
  /** @type {AuditRow[]} */
  const rows = [];
  /** @type {Map<string, {kind: string, name: string}>} */
  let names = new Map();
  /** @type {Map<string, {submittedBy?: string, decidedBy?: string}>} */
  let people = new Map();
  const row = (/** @type {AuditEvent} */ e) => ({ e, target: auditTarget(e, names), decision: auditDecision(e) });
  const more = async () => {
    const page = await ctx.app.audit({ ...filter, cursor });
    cursor = page.nextCursor || undefined;
    rows.push(...page.events.map(row));
  };
  const show = () => {
    const groups = groupChatter(rows);
    keepPlace(list, () => replace(list, h('p', { class: 'muted small', role: 'status', text: `${rows.length} event${rows.length === 1 ? '' : 's'}${cursor ? ', more are older' : ''}` }),
      table({
        caption: 'Audit trail', rows: groups, compact: true, key: (r) => String(r.e.id), selected: p.event, onSelect: (r) => ctx.setParams({ event: String(r.e.id) }),
        href: (r) => selectHref(ctx, { event: String(r.e.id) }),
        empty: 'No audit events match.',
        columns: [
          { label: 'When', cell: (r) => h('time', { datetime: new Date(r.e.createdAt * 1000).toISOString(), title: fmtTime(r.e.createdAt), text: fmtRelative(r.e.createdAt) }), link: true, class: 'when' },
          { label: 'Who', cell: (r) => h('span', { 'data-who': '', text: whoText(r.e, people) }), class: 'hide-narrow' },
          { label: 'Command', cell: (r) => { const code = (r.e.details && (r.e.details.commandType || r.e.details.command_type)) || r.e.action; return [h('span', { class: 'name', title: code, text: commandTitle(code) }), r.count > 1 ? h('span', { class: 'muted small', 'data-grouped': String(r.count), text: ` ×${r.count}` }) : null]; } },
          { label: 'Decision', cell: (r) => h('span', { class: ['decision', 'decision-' + r.decision], 'data-decision': r.decision, text: r.decision }) },
          { label: 'Target', cell: (r) => [targetCell(ctx, r.target), (r.e.details && (r.e.details.conversation_id || r.e.details.conversationId)) ? [h('br'), operatorLinks(ctx, r.e)] : null] },
        ],
      }),
      cursor ? h('button', { type: 'button', class: 'more', 'data-more': '', 'data-needs': 'read', text: 'Show older events', onclick: async () => { try { await more(); show(); } catch (e) { replace(list, errorBox(e)); } } }) : null));
    const group = p.event ? groups.find((g) => String(g.e.id) === p.event) : null;
    const sel = group || (p.event ? rows.find((r) => String(r.e.id) === p.event) : null);
    if (p.event) {
      const ev = p.event;
      const count = group ? group.count : 1;
      keepPlace(detail, () => replace(detail, sel ? h('section', { class: 'card detail', 'aria-labelledby': 'event-title' },
        h('header', { class: 'detail-head' }, h('h2', { id: 'event-title', text: `Event ${sel.e.id}` }), h('span', { title: sel.e.action, text: commandTitle(sel.e.action) })),
        h('dl', { class: 'facts' },
          h('dt', { text: 'When' }), h('dd', { text: count > 1 && group ? `${fmtTime(group.oldest.createdAt)} to ${fmtTime(sel.e.createdAt)} (${count} in a row)` : fmtTime(sel.e.createdAt) }),
          h('dt', { text: 'Who' }), h('dd', { 'data-who': '', text: whoText(sel.e, people) }),
          h('dt', { text: 'Decision' }), h('dd', { text: sel.decision }),
          h('dt', { text: 'Target' }), h('dd', null, targetCell(ctx, sel.target), sel.target ? [' ', shortId(sel.target.id)] : null),
          sel.e.details && (sel.e.details.conversation_id || sel.e.details.conversationId) ? [h('dt', { text: 'Operator' }), h('dd', null, operatorLinks(ctx, sel.e))] : null),
        h('h3', { text: 'Details' }), h('pre', { class: 'output', tabindex: '0', text: JSON.stringify(sel.e.details, null, 2) }),
        h('button', { type: 'button', class: 'link', 'data-needs': 'read', text: 'Close', 'aria-keyshortcuts': 'Escape', onclick: () => closeDetail(ctx, 'event', ev) }))
        : errorBox(new Error(`audit event ${p.event} is not among those shown; clear the filters or show older events`))));
      const shown = /** @type {HTMLElement | null} */ (detail.querySelector('.detail'));
      if (shown) {
        detailKeys(shown, ctx, 'event', ev);
        revealDetail(shown);
      }
    }
  };
  Promise.all([targetNames(ctx), ctx.app.audit(filter), proposalPeople(ctx)]).then(([n, page, pp]) => {
    if (!ctx.isCurrent()) return;
    names = n;
    people = pp;
    cursor = page.nextCursor || undefined;
    rows.push(...page.events.map(row));
    show();
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
  // New rows come in at the top as they are written (audit.appended); the
  // older pages, the scroll and the selection stay.
  ctx.onChange(['audit.appended'], async (events) => {
    try {
      if (events.some((e) => e.type === 'reset')) rows.length = 0;
      const newest = rows.length ? rows[0].e.id : 0;
      const page = await ctx.app.audit(filter);
      const fresh = page.events.filter((e) => e.id > newest);
      if (!ctx.isCurrent() || fresh.length === 0) return;
      if (rows.length === 0) cursor = page.nextCursor || undefined;
      // Names of what the new rows act on, and who proposed, read again.
      if (fresh.some((e) => { const t = auditTarget(e, names); return !t || !names.has(t.id); })) names = await targetNames(ctx);
      if (fresh.some((e) => e.details && e.details.proposal_id && !people.has(e.details.proposal_id))) people = await proposalPeople(ctx);
      if (!ctx.isCurrent()) return;
      rows.unshift(...fresh.map(row));
      show();
    } catch { /* the next change tries again */ }
  });
}
