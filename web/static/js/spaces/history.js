// History: finished runs and the audit trail.

import { h, replace, badge, fmtTime, fmtDuration } from '../dom.js';
import { tabs, selectFilter, searchBox, table, runDetail, runCells, shortId, paramValues, loading, errorBox } from './common.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext */

const FINISHED = ['succeeded', 'failed', 'cancelled'];

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function mount(el, ctx) {
  const tab = ctx.route.params.tab || 'runs';
  el.appendChild(tabs(ctx, 'tab', [{ value: 'runs', label: 'Finished runs' }, { value: 'audit', label: 'Audit trail' }], tab,
    () => ({ status: null, run: null, event: null, q: null })));
  if (tab === 'audit') return audit(el, ctx);
  return runs(el, ctx);
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function runs(el, ctx) {
  const p = ctx.route.params;
  const list = h('div', { class: 'list-pane' });
  const detail = h('div', { class: 'detail-pane' });
  el.append(h('div', { class: 'filters', role: 'search' }, selectFilter(ctx, 'status', 'Outcome', paramValues(ctx, 'status'), 'Any outcome'), searchBox(ctx, 'Search finished runs')),
    h('div', { class: p.run ? 'split' : 'single' }, list, detail));
  if (p.run) detail.appendChild(runDetail(ctx, p.run, (id) => ctx.cockpit.go(id ? `/?view=fleet&run=${encodeURIComponent(id)}` : '/?view=fleet')));
  replace(list, loading());
  ctx.app.listRuns({ status: p.status, limit: 200 }).then((page) => {
    if (!ctx.isCurrent()) return;
    const q = (p.q || '').toLowerCase();
    const rows = page.runs.filter((r) => FINISHED.includes(r.status))
      .filter((r) => !q || [r.playbookName, r.input, r.id, r.status].some((s) => (s || '').toLowerCase().includes(q)));
    replace(list, table({
      caption: 'Finished runs', rows, key: (r) => r.id, selected: p.run, onSelect: (r) => ctx.setParams({ run: r.id }),
      empty: 'No finished runs match.',
      columns: [
        { label: 'Outcome', cell: (r) => badge(r.status) },
        { label: 'Playbook', cell: (r) => r.playbookName },
        { label: 'Ended', cell: (r) => (r.endedAt ? fmtTime(r.endedAt) : runCells(r).when) },
        { label: 'Duration', cell: (r) => fmtDuration(r.durationMs), class: 'num' },
        { label: 'Id', cell: (r) => shortId(r.id) },
      ],
    }));
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function audit(el, ctx) {
  const p = ctx.route.params;
  const list = h('div', { class: 'list-pane' });
  const detail = h('div', { class: 'detail-pane' });
  el.append(h('div', { class: 'filters', role: 'search' }, searchBox(ctx, 'Search the audit trail')), h('div', { class: p.event ? 'split' : 'single' }, list, detail));
  replace(list, loading());
  ctx.app.audit({ limit: 200 }).then((page) => {
    if (!ctx.isCurrent()) return;
    const q = (p.q || '').toLowerCase();
    const rows = page.events.filter((e) => !q || [e.action, e.actor, e.targetId || '', JSON.stringify(e.details)].some((s) => s.toLowerCase().includes(q)));
    replace(list, table({
      caption: 'Audit trail', rows, key: (e) => String(e.id), selected: p.event, onSelect: (e) => ctx.setParams({ event: String(e.id) }),
      empty: 'No audit events match.',
      columns: [
        { label: 'When', cell: (e) => fmtTime(e.createdAt) },
        { label: 'Actor', cell: (e) => e.actor },
        { label: 'Action', cell: (e) => h('code', { text: e.action }) },
        { label: 'Decision', cell: (e) => (e.details && (e.details.decision || e.details.commandType || e.details.command_type)) || '' },
        { label: 'Target', cell: (e) => (e.targetId ? shortId(e.targetId) : '—') },
      ],
    }));
    const sel = p.event ? page.events.find((e) => String(e.id) === p.event) : null;
    if (p.event) {
      replace(detail, sel ? h('section', { class: 'card detail', 'aria-label': 'Audit event' },
        h('header', { class: 'detail-head' }, h('h2', { text: `Event ${sel.id}` }), h('code', { text: sel.action })),
        h('dl', { class: 'facts' }, h('dt', { text: 'When' }), h('dd', { text: fmtTime(sel.createdAt) }), h('dt', { text: 'Actor' }), h('dd', { text: sel.actor }), h('dt', { text: 'Target' }), h('dd', { text: sel.targetId || '—' })),
        h('h3', { text: 'Details' }), h('pre', { class: 'output', tabindex: '0', text: JSON.stringify(sel.details, null, 2) }),
        h('button', { type: 'button', class: 'link', text: 'Close', onclick: () => ctx.setParams({ event: null }) }))
        : errorBox(new Error(`audit event ${p.event} is not among the newest 200`)));
    }
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
}
