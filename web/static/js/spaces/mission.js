// Mission: the overview (run counts, recent failures) and, with view=fleet,
// the fleet of runs (status/trigger/playbook filters, search, selection,
// run detail with output). Fleet is a view of mission, not a seventh space.

import { h, replace, badge, fmtDuration } from '../dom.js';
import { into, tabs, selectFilter, searchBox, table, runDetail, runCells, shortId, paramValues, loading, errorBox } from './common.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext @typedef {import('../appapi.js').Run} Run */

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function mount(el, ctx) {
  const view = ctx.route.params.view || 'overview';
  el.appendChild(tabs(ctx, 'view', [{ value: 'overview', label: 'Overview' }, { value: 'fleet', label: 'Fleet' }], view,
    (v) => (v === 'overview' ? { status: null, trigger: null, playbook: null, q: null, run: null } : {})));
  if (view === 'fleet') return fleet(el, ctx);
  return overview(el, ctx);
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function overview(el, ctx) {
  const stats = h('section', { class: 'cards', 'aria-label': 'Run counts' });
  const failures = h('section', { class: 'card', 'aria-labelledby': 'failures-title' });
  const active = h('section', { class: 'card', 'aria-labelledby': 'active-title' });
  el.append(stats, h('div', { class: 'columns' }, failures, active));
  into(stats, async () => Promise.all([ctx.app.runStats('24h'), ctx.app.runStats('7d')]), ([day, week]) => [
    statCard('Runs, last 24 hours', day.total, day.counts, day.medianDurationMs),
    statCard('Runs, last 7 days', week.total, week.counts, week.medianDurationMs),
  ], ctx);
  replace(failures, h('h2', { id: 'failures-title', text: 'Recent failures' }), loading());
  ctx.app.listRuns({ status: 'failed', limit: 8 }).then((page) => {
    if (!ctx.isCurrent()) return;
    replace(failures, h('h2', { id: 'failures-title', text: 'Recent failures' }),
      page.runs.length === 0 ? h('p', { class: 'muted', text: 'No failed runs. ' }) : h('ul', { class: 'list' }, page.runs.map((r) => h('li', null,
        h('a', {
          href: `/?view=fleet&status=failed&run=${encodeURIComponent(r.id)}`,
          onclick: (/** @type {MouseEvent} */ ev) => { ev.preventDefault(); ctx.cockpit.go(`/?view=fleet&status=failed&run=${encodeURIComponent(r.id)}`); },
        }, h('strong', { text: r.playbookName }), ' ', runCells(r).when),
        r.error ? h('div', { class: 'muted small', text: `${r.error.code}: ${r.error.message}` } ) : null))),
      h('a', { class: 'more', href: '/?view=fleet&status=failed', text: 'All failed runs →', onclick: (/** @type {MouseEvent} */ ev) => { ev.preventDefault(); ctx.cockpit.go('/?view=fleet&status=failed'); } }));
  }).catch((e) => ctx.isCurrent() && replace(failures, h('h2', { id: 'failures-title', text: 'Recent failures' }), errorBox(e)));
  replace(active, h('h2', { id: 'active-title', text: 'Running now' }), loading());
  ctx.app.listRuns({ status: 'running', limit: 8 }).then((page) => {
    if (!ctx.isCurrent()) return;
    replace(active, h('h2', { id: 'active-title', text: 'Running now' }),
      page.runs.length === 0 ? h('p', { class: 'muted', text: 'Nothing is running.' }) : h('ul', { class: 'list' }, page.runs.map((r) => h('li', null, badge(r.status), ' ', h('strong', { text: r.playbookName }), ' ', runCells(r).when))));
  }).catch((e) => ctx.isCurrent() && replace(active, h('h2', { id: 'active-title', text: 'Running now' }), errorBox(e)));
}

/** @param {string} title @param {number} total @param {Record<string, number>} counts @param {number | null} median */
function statCard(title, total, counts, median) {
  return h('div', { class: 'card stat' },
    h('h2', { text: title }),
    h('p', { class: 'big', text: String(total) }),
    h('ul', { class: 'counts' }, ['succeeded', 'failed', 'running', 'queued', 'cancelled'].map((s) => h('li', null, badge(s), ' ', h('span', { text: String((counts && counts[s]) || 0) })))),
    h('p', { class: 'muted small', text: `median duration ${fmtDuration(median)}` }));
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function fleet(el, ctx) {
  const p = ctx.route.params;
  const filters = h('div', { class: 'filters', role: 'search' },
    selectFilter(ctx, 'status', 'Status', paramValues(ctx, 'status')),
    selectFilter(ctx, 'trigger', 'Trigger', paramValues(ctx, 'trigger')),
    // The playbook filter has no picker of its own: links and the operator set it.
    p.playbook ? h('span', { class: 'chip' }, 'Playbook: ', h('strong', { text: p.playbook }),
      h('button', { type: 'button', class: 'link', 'aria-label': `Clear the playbook filter ${p.playbook}`, text: '×', onclick: () => ctx.setParams({ playbook: null }) })) : null,
    searchBox(ctx, 'Search runs (playbook, input, id)'),
    h('button', { type: 'button', text: 'Refresh', onclick: () => load() }));
  const list = h('div', { class: 'list-pane' });
  const detail = h('div', { class: 'detail-pane' });
  el.append(filters, h('div', { class: p.run ? 'split' : 'single' }, list, detail));
  if (p.run) detail.appendChild(runDetail(ctx, p.run, (id) => ctx.setParams({ run: id, status: null })));
  /** @type {any} */
  let timer = null;
  const load = async () => {
    try {
      const page = await ctx.app.listRuns({ status: p.status, trigger: p.trigger, playbook: p.playbook, limit: 100 });
      if (!ctx.isCurrent()) return;
      const q = (p.q || '').toLowerCase();
      const rows = q ? page.runs.filter((r) => [r.playbookName, r.input, r.id, r.status, r.trigger].some((s) => (s || '').toLowerCase().includes(q))) : page.runs;
      replace(list, h('p', { class: 'muted small', role: 'status', text: `${rows.length} run${rows.length === 1 ? '' : 's'}${page.nextCursor ? ' (newest 100)' : ''}` }),
        table({
          caption: 'Runs', rows, key: (r) => r.id, selected: p.run,
          onSelect: (r) => ctx.setParams({ run: r.id }),
          empty: 'No runs match.',
          columns: [
            { label: 'Status', cell: (r) => badge(r.status) },
            { label: 'Playbook', cell: (r) => r.playbookName },
            { label: 'Trigger', cell: (r) => r.trigger },
            { label: 'Created', cell: (r) => runCells(r).when },
            { label: 'Duration', cell: (r) => fmtDuration(r.durationMs), class: 'num' },
            { label: 'Id', cell: (r) => shortId(r.id) },
          ],
        }));
      if (page.runs.some((r) => r.status === 'queued' || r.status === 'running')) {
        clearTimeout(timer);
        timer = setTimeout(() => ctx.isCurrent() && load(), 3000);
      }
    } catch (e) {
      if (ctx.isCurrent()) replace(list, errorBox(e));
    }
  };
  replace(list, loading());
  load();
  return () => clearTimeout(timer);
}
