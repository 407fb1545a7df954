// History: finished runs and the audit trail. Each audit row shows who did
// what, the decision, and the target by name with a link to it; names are
// looked up in the application lists (a deleted target keeps the name its
// command carried).

import { h, replace, badge, fmtTime, fmtRelative, fmtDuration } from '../dom.js';
import { tabs, tabPanel, selectFilter, searchBox, table, runCells, shortId, paramValues, loading, errorBox, selectHref, linkTo } from './common.js';
import { runDetail } from './run-detail.js';

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
    () => ({ status: null, run: null, event: null, q: null })), panel);
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
  ctx.app.listRuns({ status: p.status, limit: 200 }).then((page) => {
    if (!ctx.isCurrent()) return;
    const q = (p.q || '').toLowerCase();
    const rows = page.runs.filter((r) => FINISHED.includes(r.status))
      .filter((r) => !q || [r.playbookName, r.input, r.id, r.status].some((s) => (s || '').toLowerCase().includes(q)));
    replace(list, table({
      caption: 'Finished runs', rows, key: (r) => r.id, selected: p.run, onSelect: (r) => ctx.setParams({ run: r.id }),
      href: (r) => selectHref(ctx, { run: r.id }),
      empty: 'No finished runs match.',
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
  for (const r of rs.runs) names.set(r.id, { kind: 'run', name: `run of ${r.playbookName}` });
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
  const label = [h('span', { class: 'muted small', text: t.kind + ' ' }), h('span', { class: 'name', text: t.name })];
  return t.href ? linkTo(ctx, t.href, ...label) : h('span', { title: t.id }, ...label);
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function audit(el, ctx) {
  const p = ctx.route.params;
  const list = h('div', { class: 'list-pane' });
  const detail = h('div', { class: 'detail-pane' });
  el.append(h('div', { class: 'filters', role: 'search' }, searchBox(ctx, 'Search the audit trail')), h('div', { class: p.event ? 'split' : 'single' }, list, detail));
  replace(list, loading());
  Promise.all([ctx.app.audit({ limit: 200 }), targetNames(ctx.app)]).then(([page, names]) => {
    if (!ctx.isCurrent()) return;
    const q = (p.q || '').toLowerCase();
    const rows = page.events.map((e) => ({ e, target: auditTarget(e, names), decision: auditDecision(e) }))
      .filter(({ e, target }) => !q || [e.action, e.actor, e.targetId || '', target ? target.name : '', JSON.stringify(e.details)].some((s) => s.toLowerCase().includes(q)));
    replace(list, table({
      caption: 'Audit trail', rows, key: (r) => String(r.e.id), selected: p.event, onSelect: (r) => ctx.setParams({ event: String(r.e.id) }),
      href: (r) => selectHref(ctx, { event: String(r.e.id) }),
      empty: 'No audit events match.',
      columns: [
        { label: 'When', cell: (r) => h('time', { datetime: new Date(r.e.createdAt * 1000).toISOString(), title: fmtTime(r.e.createdAt), text: fmtRelative(r.e.createdAt) }), link: true, class: 'when' },
        { label: 'Actor', cell: (r) => r.e.actor, class: 'hide-narrow' },
        { label: 'Command', cell: (r) => h('code', { class: 'name', text: (r.e.details && (r.e.details.commandType || r.e.details.command_type)) || r.e.action }) },
        { label: 'Decision', cell: (r) => h('span', { class: ['decision', 'decision-' + r.decision], 'data-decision': r.decision, text: r.decision }) },
        { label: 'Target', cell: (r) => targetCell(ctx, r.target) },
      ],
    }));
    const sel = p.event ? rows.find((r) => String(r.e.id) === p.event) : null;
    if (p.event) {
      replace(detail, sel ? h('section', { class: 'card detail', 'aria-labelledby': 'event-title' },
        h('header', { class: 'detail-head' }, h('h2', { id: 'event-title', text: `Event ${sel.e.id}` }), h('code', { text: sel.e.action })),
        h('dl', { class: 'facts' },
          h('dt', { text: 'When' }), h('dd', { text: fmtTime(sel.e.createdAt) }),
          h('dt', { text: 'Actor' }), h('dd', { text: sel.e.actor }),
          h('dt', { text: 'Decision' }), h('dd', { text: sel.decision }),
          h('dt', { text: 'Target' }), h('dd', null, targetCell(ctx, sel.target), sel.target ? [' ', shortId(sel.target.id)] : null)),
        h('h3', { text: 'Details' }), h('pre', { class: 'output', tabindex: '0', text: JSON.stringify(sel.e.details, null, 2) }),
        h('button', { type: 'button', class: 'link', text: 'Close', onclick: () => ctx.setParams({ event: null }) }))
        : errorBox(new Error(`audit event ${p.event} is not among the newest 200`)));
    }
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
}
