// Mission: the overview (run counts, recent failures) and, with view=fleet,
// the fleet of runs (status/trigger/playbook filters, search, selection,
// run detail with output). Fleet is a view of mission, not a seventh space.

import { h, replace, badge, fmtDuration } from '../dom.js';
import { loading, errorBox } from './loading.js';
import { tabs, tabPanel } from './tabs.js';
import { selectFilter, searchBox, paramValues, filterBar } from './filters.js';
import { selectHref, linkTo } from './links.js';
import { table } from './table.js';
import { runCells, shortId } from './cells.js';
import { keepPlace } from './keep-place.js';
import { errorSentence } from '../words.js';
import { runDetail } from './run-detail.js';
import { barChart } from '../charts.js';
import { activity, STATUSES } from '../insights.js';
import { zoneAbbr } from '../time.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext @typedef {import('../appapi.js').Run} Run */

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function mount(el, ctx) {
  const view = ctx.route.params.view || 'overview';
  const panel = tabPanel('view', view);
  el.append(tabs(ctx, 'view', [{ value: 'overview', label: 'Overview' }, { value: 'fleet', label: 'Fleet' }], view,
    (v) => (v === 'overview' ? { status: null, trigger: null, playbook: null, q: null, run: null } : {})), panel);
  if (view === 'fleet') return fleet(panel, ctx);
  return overview(panel, ctx);
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function overview(el, ctx) {
  const stats = h('section', { class: 'cards', 'aria-label': 'Run counts' });
  const failures = h('section', { class: 'card', 'aria-labelledby': 'failures-title' });
  const active = h('section', { class: 'card', 'aria-labelledby': 'active-title' });
  const charts = h('section', { class: 'card charts', 'aria-labelledby': 'charts-title' });
  el.append(stats, charts, h('div', { class: 'columns' }, failures, active));
  const chartsAgain = activityCharts(charts, ctx);
  const counts = () => Promise.all([ctx.app.runStats('24h'), ctx.app.runStats('7d')]).then(([day, week]) => ctx.isCurrent() && keepPlace(stats, () => replace(stats,
    statCard('Runs, last 24 hours', day.total, day.counts, day.medianDurationMs),
    statCard('Runs, last 7 days', week.total, week.counts, week.medianDurationMs))))
    .catch((e) => ctx.isCurrent() && replace(stats, errorBox(e)));
  replace(stats, loading());
  counts();
  replace(failures, h('h2', { id: 'failures-title', text: 'Recent failures' }), loading());
  replace(active, h('h2', { id: 'active-title', text: 'Running now' }), loading());
  runLists(ctx, failures, active);
  // Runs that start or end anywhere (the CLI, the dock, the scheduler, another daemon) show here.
  // The counts and the charts beside them are read again together: one
  // must never say a run the other does not.
  ctx.onChange(['run.created', 'run.changed'], () => { counts(); chartsAgain(); runLists(ctx, failures, active); });
}

/**
 * The overview's run lists, (re)read: the recent failures and what runs now.
 * @param {SpaceContext} ctx @param {HTMLElement} failures @param {HTMLElement} active
 */
function runLists(ctx, failures, active) {
  ctx.app.listRuns({ status: 'failed', limit: 8 }).then((page) => {
    if (!ctx.isCurrent()) return;
    keepPlace(failures, () => replace(failures, h('h2', { id: 'failures-title', text: 'Recent failures' }),
      page.runs.length === 0 ? h('p', { class: 'muted', text: 'No failed runs. ' }) : h('ul', { class: 'list' }, page.runs.map((r) => h('li', null,
        linkTo(ctx, `/?view=fleet&status=failed&run=${encodeURIComponent(r.id)}`, h('strong', { class: 'name', text: r.playbookName }), ' ', runCells(r).when),
        r.error ? h('div', { class: 'muted small', title: r.error.code, text: errorSentence(r.error) }) : null))),
      linkTo(ctx, '/?view=fleet&status=failed', 'All failed runs →')));
  }).catch((e) => ctx.isCurrent() && replace(failures, h('h2', { id: 'failures-title', text: 'Recent failures' }), errorBox(e)));
  ctx.app.listRuns({ status: 'running', limit: 8 }).then((page) => {
    if (!ctx.isCurrent()) return;
    keepPlace(active, () => replace(active, h('h2', { id: 'active-title', text: 'Running now' }),
      page.runs.length === 0 ? h('p', { class: 'muted', text: 'Nothing is running.' }) : h('ul', { class: 'list', 'data-running': '' }, page.runs.map((r) => h('li', { 'data-key': r.id }, badge(r.status), ' ', linkTo(ctx, `/?view=fleet&run=${encodeURIComponent(r.id)}`, h('strong', { class: 'name', text: r.playbookName })), ' ', runCells(r).when)))));
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

const STATUS_LABELS = { succeeded: 'succeeded', failed: 'failed', cancelled: 'cancelled', running: 'running', queued: 'queued' };

/**
 * Runs over time by status (24 h by hour, 7 d by day) and the spread of run
 * durations, from insights.js; returns what reads them again (in place,
 * the newest answer winning).
 * @param {HTMLElement} el @param {SpaceContext} ctx @returns {() => void}
 */
function activityCharts(el, ctx) {
  const head = h('h2', { id: 'charts-title', text: 'Activity' });
  replace(el, head, loading('Counting runs…'));
  let asked = 0;
  const read = () => {
    const mine = ++asked;
    Promise.all([activity(ctx.app, '24h'), activity(ctx.app, '7d')]).then(([day, week]) => {
      if (ctx.isCurrent() && mine === asked) keepPlace(el, () => draw(day, week));
    }).catch((e) => ctx.isCurrent() && mine === asked && replace(el, head, errorBox(e)));
  };
  /** @param {Awaited<ReturnType<typeof activity>>} day @param {Awaited<ReturnType<typeof activity>>} week */
  const draw = (day, week) => {
    const series = STATUSES.map((key) => ({ key, label: STATUS_LABELS[/** @type {keyof STATUS_LABELS} */ (key)] }));
    const columns = (/** @type {typeof day} */ a) => a.buckets.map((b) => ({ label: b.label, values: b.counts }));
    const words = (/** @type {typeof day} */ a, /** @type {string} */ span, /** @type {string} */ unit) => {
      if (a.total === 0) return `No runs in the ${span}.`;
      const busiest = a.buckets.reduce((m, b) => (sum(b.counts) > sum(m.counts) ? b : m));
      const failed = a.buckets.reduce((n, b) => n + (b.counts.failed || 0), 0);
      return `${a.total} run${a.total === 1 ? '' : 's'} in the ${span}, ${failed} failed; the busiest ${unit} was ${busiest.label} with ${sum(busiest.counts)}.` +
        (a.partial ? ' Counted from the newest 1000 runs only.' : '');
    };
    const d = week.durations;
    if (week.total === 0 && day.total === 0) {
      // Empty axes say nothing: say how to get runs instead.
      replace(el, head, h('div', { class: 'empty-state', 'data-empty': 'activity' },
        h('p', { text: 'No runs in the last 7 days, so there is nothing to chart yet.' }),
        h('p', null, 'Launch a playbook from the ', linkTo(ctx, '/library', 'Library'), ', put one on a timetable in ',
          linkTo(ctx, '/schedules', 'Schedules'), ', or ask the operator (Ctrl+.) to do it for you.')));
      return;
    }
    replace(el, head,
      h('div', { class: 'chart-grid' },
        barChart({ title: `Runs per hour, last 24 hours (${zoneAbbr()})`, summary: words(day, 'last 24 hours', 'hour'), series, columns: columns(day), labelEvery: 3 }),
        barChart({ title: `Runs per day, last 7 days (${zoneAbbr()})`, summary: words(week, 'last 7 days', 'day'), series, columns: columns(week) }),
        barChart({
          title: 'How long runs took, last 7 days',
          summary: d.count === 0 ? 'No finished runs in the last 7 days.'
            : `${d.count} finished run${d.count === 1 ? '' : 's'}; half took ${fmtDuration(d.median)} or less, nine in ten ${fmtDuration(d.p90)} or less.`,
          series: [{ key: 'duration', label: 'runs' }],
          columns: d.bins.map((b) => ({ label: b.label, values: { duration: b.count } })),
        })));
  };
  read();
  return read;
}

/** @param {Record<string, number>} counts */
function sum(counts) {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

/** Seconds in each time range the registry offers. @type {Record<string, number>} */
export const RANGE_SECONDS = { '1h': 3600, '24h': 86400, '7d': 7 * 86400, '30d': 30 * 86400 };

/** Human names of the time ranges. @type {Record<string, string>} */
export const RANGE_LABELS = { '1h': 'Last hour', '24h': 'Last 24 hours', '7d': 'Last 7 days', '30d': 'Last 30 days' };

/** Runs per page of the fleet. */
const PAGE = 50;

/**
 * The fleet: the server searches (playbook, input, id), filters by status,
 * trigger, playbook and time range, counts by status for the range, and
 * pages with a cursor; running runs refresh themselves.
 * @param {HTMLElement} el @param {SpaceContext} ctx
 */
function fleet(el, ctx) {
  const p = ctx.route.params;
  const filters = filterBar({
    active: [p.status, p.trigger, p.range, p.playbook].filter(Boolean).length,
    fields: [
      selectFilter(ctx, 'status', 'Status', paramValues(ctx, 'status')),
      selectFilter(ctx, 'trigger', 'Trigger', paramValues(ctx, 'trigger')),
      rangeFilter(ctx),
      // The playbook filter has no picker of its own: links and the operator set it.
      p.playbook ? h('span', { class: 'chip' }, 'Playbook: ', h('strong', { text: p.playbook }),
        h('button', { type: 'button', class: 'link', 'data-needs': 'read', 'aria-label': `Clear the playbook filter ${p.playbook}`, text: '×', onclick: () => ctx.setParams({ playbook: null }) })) : null,
    ],
    search: searchBox(ctx, 'Search runs (playbook, input, id)'),
    actions: [h('button', { type: 'button', 'data-needs': 'read', text: 'Refresh', onclick: () => load() })],
  });
  const counts = h('div', { class: 'status-chips', role: 'group', 'aria-label': 'Runs by status' });
  const list = h('div', { class: 'list-pane' });
  const detail = h('div', { class: 'detail-pane' });
  el.append(filters, counts, h('div', { class: p.run ? 'split' : 'single' }, list, detail));
  if (p.run) detail.appendChild(runDetail(ctx, p.run));
  /** @type {any} */
  let timer = null;
  let pages = 1;
  const since = p.range && RANGE_SECONDS[p.range] ? String(Math.floor(Date.now() / 1000 - RANGE_SECONDS[p.range])) : undefined;
  const filter = { status: p.status, trigger: p.trigger, playbook: p.playbook, q: p.q, since, limit: PAGE, counts: 'true' };
  const load = async () => {
    clearTimeout(timer);
    try {
      /** @type {Run[]} */
      const rows = [];
      let first = null;
      /** @type {string | undefined} */
      let cursor;
      for (let i = 0; i < pages; i++) {
        const page = await ctx.app.listRuns({ ...filter, cursor });
        if (!first) first = page;
        rows.push(...page.runs);
        cursor = page.nextCursor || undefined;
        if (!cursor) break;
      }
      if (!ctx.isCurrent() || !first) return;
      replace(counts, statusChips(ctx, first.counts || {}, first.total ?? rows.length));
      keepPlace(list, () => replace(list, h('p', { class: 'muted small', role: 'status', text: `${rows.length} run${rows.length === 1 ? '' : 's'} shown${cursor ? ', more are older' : ''}` }),
        table({
          caption: 'Runs', rows, key: (r) => r.id, selected: p.run,
          onSelect: (r) => ctx.setParams({ run: r.id }), href: (r) => selectHref(ctx, { run: r.id }),
          empty: filter.status || filter.trigger || filter.playbook || filter.q || since ? 'No runs match these filters.'
            : h('span', null, 'No runs yet. Launch a playbook from the ', linkTo(ctx, '/library', 'Library'), ', or ask the operator (Ctrl+.).'),
          columns: [
            { label: 'Status', cell: (r) => badge(r.status) },
            { label: 'Playbook', cell: (r) => r.playbookName, link: true, class: 'name' },
            { label: 'Trigger', cell: (r) => r.trigger, class: 'trigger' },
            { label: 'Created', cell: (r) => runCells(r).when, class: 'when' },
            { label: 'Duration', cell: (r) => fmtDuration(r.durationMs), class: 'num' },
            { label: 'Id', cell: (r) => shortId(r.id) },
            // Why a run failed, at a glance (the detail has the whole message).
            { label: 'Error', cell: (r) => (r.error ? h('span', { class: 'run-error', title: `${r.error.code}: ${r.error.message}`, text: shortError(r.error) }) : null), class: 'error-cell' },
          ],
          compact: true,
        }),
        cursor ? h('button', { type: 'button', class: 'more', 'data-more': '', text: `Show ${PAGE} older runs`, onclick: () => { pages++; load(); } }) : null));
      // Running runs refresh themselves.
      if (rows.some((r) => r.status === 'queued' || r.status === 'running')) timer = setTimeout(() => ctx.isCurrent() && load(), 3000);
    } catch (e) {
      if (ctx.isCurrent()) replace(list, errorBox(e));
    }
  };
  replace(list, loading());
  load();
  // Runs launched or ended anywhere appear in place (live.js).
  ctx.onChange(['run.created', 'run.changed'], () => load());
  return () => clearTimeout(timer);
}

/**
 * A run's error in a few words for its row: the sentence, cut at about 80
 * characters.
 * @param {{code: string, message: string}} e
 */
function shortError(e) {
  const text = errorSentence(e);
  return text.length > 80 ? text.slice(0, 78).replace(/\s+\S*$/, '') + '…' : text;
}

/** The time range select bound to the range param. @param {SpaceContext} ctx */
export function rangeFilter(ctx) {
  const id = 'range-' + ctx.route.space.id;
  const sel = /** @type {HTMLSelectElement} */ (h('select', { id, name: 'range', onchange: () => ctx.setParams({ range: sel.value || null }, { replace: true }) },
    h('option', { value: '', text: 'All time' }),
    paramValues(ctx, 'range').map((v) => h('option', { value: v, text: RANGE_LABELS[v] || v, selected: ctx.route.params.range === v }))));
  return h('div', { class: 'field inline' }, h('label', { for: id, text: 'Time' }), sel);
}

/**
 * Counts by status for the range and the other filters, each a link to
 * that status.
 * @param {SpaceContext} ctx @param {Record<string, number>} counts @param {number} total
 */
function statusChips(ctx, counts, total) {
  const cur = ctx.route.params.status || '';
  const chip = (/** @type {string} */ status, /** @type {string} */ label, /** @type {number} */ n) => linkTo(ctx, selectHref(ctx, { status: status || null, run: null }),
    status ? badge(status) : h('span', { text: label }), ' ', h('strong', { text: String(n) }));
  return [
    h('span', { class: ['chip', cur === '' ? 'current' : ''], 'data-count': 'all' }, chip('', 'All', total)),
    ...STATUSES.map((st) => h('span', { class: ['chip', cur === st ? 'current' : ''], 'data-count': st }, chip(st, st, counts[st] || 0))),
  ];
}
