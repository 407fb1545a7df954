// System: health (doctor) with charts of the operator's recent turns and
// model errors, maintenance actions behind a confirmation dialog, and the
// theme.

import { confirmDialog } from '../dialogs.js';
import { h, replace, badge, uid } from '../dom.js';
import { fmtTime, fmtClock, zoneAbbr, zoneSetting, setZoneSetting, localZoneName } from '../time.js';
import { errorText } from '../api.js';
import { loading, errorBox } from './loading.js';
import { tabs, tabPanel } from './tabs.js';
import { keepPlace } from './keep-place.js';
import { barChart } from '../charts.js';
import { team } from './team.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext */

const ACTIONS = [
  { action: 'integrity_check', title: 'Integrity check', body: 'Reads the whole database and reports any corruption. Safe, but slow on a large database.', danger: false },
  { action: 'checkpoint', title: 'WAL checkpoint', body: 'Folds the write-ahead log into the database file.', danger: false },
  { action: 'vacuum', title: 'Vacuum', body: 'Rebuilds the database file to reclaim space. Writes wait while it runs.', danger: false },
  { action: 'purge_deleted_conversations', title: 'Purge deleted conversations', body: 'Permanently removes operator conversations deleted longer ago than the recovery window, with their frames, proposals and effects. This cannot be undone.', danger: true },
];

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function mount(el, ctx) {
  const tab = ctx.route.params.tab || 'health';
  const body = tabPanel('tab', tab);
  const me = ctx.cockpit.me;
  // The team page is for admins: others do not see its tab (a link to it says why).
  const admin = !me || me.role === 'admin';
  el.append(tabs(ctx, 'tab', [{ value: 'health', label: 'Health' }, { value: 'maintenance', label: 'Maintenance' }, { value: 'appearance', label: 'Appearance' },
    ...(admin || tab === 'team' ? [{ value: 'team', label: 'Team' }] : [])], tab), body);
  if (tab === 'team') return team(body, ctx);
  if (tab === 'maintenance') return maintenance(body, ctx);
  if (tab === 'appearance') return appearance(body, ctx);
  return health(body, ctx);
}

/** @param {number | null | undefined} n */
function bytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(i ? 1 : 0)} ${u[i]}`;
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function health(el, ctx) {
  /** @type {HTMLElement | null} the cards of the work in flight, read again on every change */
  let work = null;
  /** @param {any} r */
  const workCards = (r) => [
    section('Runs', [['Queued', r.runs && r.runs.queued], ['Running', r.runs && r.runs.running], ['Workers', r.runs && r.runs.workers]]),
    section('Schedules', [['Enabled', r.schedules && r.schedules.enabled], ['Scheduler', r.schedules && (r.schedules.schedulerRunning ? state('running', 'succeeded') : state('stopped', 'failed'))]]),
    section('Operator', [['Turns queued', r.operator && r.operator.turnsQueued], ['Turns running', r.operator && r.operator.turnsRunning],
      // What waits for a decision opens the approvals inbox.
      ['Awaiting confirmation', r.operator ? h('button', { type: 'button', class: 'link inline', 'data-needs': 'read', 'data-open-inbox': '', title: 'Open the approvals waiting for a decision', text: String(r.operator.turnsAwaitingConfirmation), onclick: () => ctx.cockpit.openInbox() }) : undefined],
      ['Indeterminate proposals', r.operator && r.operator.indeterminateTotal]]),
  ];
  const load = async () => {
    replace(el, loading('Running the doctor…'));
    try {
      const r = await ctx.app.health();
      if (!ctx.isCurrent()) return;
      const statusClass = r.status === 'ok' ? 'succeeded' : r.status === 'degraded' ? 'queued' : 'failed';
      work = h('div', { class: 'cards-inline', 'data-work': '' }, workCards(r));
      replace(el,
        h('div', { class: 'card health-head' },
          h('h2', null, 'Status ', h('span', { class: ['badge', 'badge-' + statusClass], text: r.status })),
          h('p', { class: 'muted', text: `checked ${fmtTime(r.checkedAt)}; the work in flight below stays live` }),
          h('button', { type: 'button', 'data-needs': 'read', text: 'Check again', onclick: load })),
        (r.problems || []).length ? h('div', { class: 'card' }, h('h2', { text: 'Problems' }), h('ul', { class: 'list problems' }, r.problems.map((/** @type {string} */ p) => h('li', { text: p })))) : h('p', { class: 'muted', text: 'No problems found.' }),
        h('div', { class: 'cards' },
          section('Database', [['File', r.database && r.database.file], ['Schema version', r.database && r.database.schemaVersion], ['Quick check', r.database && r.database.quickCheck],
            ['Size', bytes(r.database && r.database.sizeBytes)], ['WAL', bytes(r.database && r.database.walBytes)], ['Free space', bytes(r.database && r.database.freeBytes)]]),
          section('Model', [['Provider', (r.model && r.model.provider) || 'none'],
            ['Configured', r.model && yesNo(r.model.configured)],
            ['Health', r.model ? (r.model.healthy === undefined || r.model.healthy === null ? 'not checked' : r.model.healthy ? state('healthy', 'succeeded') : state('unhealthy', 'failed')) : undefined],
            ['Error', r.model && r.model.error]]),
          work),
        operatorCharts(ctx));
    } catch (e) {
      if (ctx.isCurrent()) replace(el, errorBox(e), h('button', { type: 'button', 'data-needs': 'read', text: 'Try again', onclick: load }));
    }
  };
  load();
  // Runs, schedules and decisions change anywhere: their counts follow,
  // without the doctor's slower checks (those wait for Check again).
  ctx.onChange(['run.created', 'run.changed', 'schedule.changed', 'proposal.changed', 'audit.appended'], () => {
    if (!work) return;
    ctx.app.healthWork().then((r) => { if (ctx.isCurrent() && work && work.isConnected) keepPlace(work, () => replace(/** @type {HTMLElement} */ (work), workCards(r))); }).catch(() => {});
  });
}

/**
 * A yes/no fact in words: the report's booleans are never shown raw.
 * @param {unknown} v
 */
function yesNo(v) {
  if (v === true) return 'yes';
  if (v === false) return 'no';
  return undefined;
}

/** A state as a badge (its words, coloured by a status). @param {string} text @param {string} as */
function state(text, as) {
  return h('span', { class: ['badge', 'badge-' + as], text });
}

/**
 * A card of facts. Values are text or a node; a boolean would be a bug.
 * @param {string} title @param {[string, string | number | Node | null | undefined][]} rows
 */
function section(title, rows) {
  return h('section', { class: 'card' }, h('h2', { text: title }), h('dl', { class: 'facts' }, rows.filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => [h('dt', { text: k }), h('dd', null, v instanceof Node ? v : String(v))])));
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function maintenance(el, ctx) {
  const out = h('div', { class: 'maintenance-result', 'aria-live': 'polite' });
  el.append(
    h('p', { class: 'muted', text: 'Each action asks for confirmation and is recorded in the audit trail.' }),
    h('div', { class: 'cards' }, ACTIONS.map((a) => h('section', { class: 'card' },
      h('h2', { text: a.title }), h('p', { text: a.body }),
      h('button', {
        type: 'button', class: a.danger ? 'danger' : '', 'data-action': a.action, 'data-needs': 'maintenance', text: `Run ${a.title.toLowerCase()}…`,
        onclick: async (/** @type {Event} */ ev) => {
          const btn = /** @type {HTMLButtonElement} */ (ev.currentTarget);
          if (!(await confirmDialog({ title: `${a.title}?`, body: a.body, confirm: a.title, danger: a.danger }))) return;
          btn.disabled = true;
          replace(out, loading(`${a.title}…`));
          try {
            const r = await ctx.app.maintenance(a.action);
            const res = r && r.result ? r.result : r;
            replace(out, h('div', { class: 'card' }, h('h2', null, `${a.title}: `, badge(res && res.ok === false ? 'failed' : 'succeeded')), h('pre', { class: 'output', text: JSON.stringify(r, null, 2) })));
          } catch (e) {
            replace(out, h('div', { class: 'error-box', role: 'alert', text: errorText(e) }));
          } finally {
            btn.disabled = false;
          }
        },
      })))),
    out);
}

/** @param {HTMLElement} el @param {SpaceContext} ctx */
function appearance(el, ctx) {
  const name = uid('theme');
  const current = ctx.cockpit.theme;
  const themes = ctx.cockpit.registry ? ctx.cockpit.registry.themes : ['light', 'dark'];
  const zone = uid('zone');
  const now = Date.now() / 1000;
  el.append(h('fieldset', { class: 'card' }, h('legend', { text: 'Theme' }),
    themes.map((t) => {
      const id = `${name}-${t}`;
      return h('div', { class: 'field check' }, h('input', {
        type: 'radio', id, name, value: t, checked: t === current,
        onchange: () => ctx.cockpit.applyTheme(t),
      }), h('label', { for: id, text: t === 'dark' ? 'Dark' : t === 'light' ? 'Light' : t }));
    }),
    h('p', { class: 'muted', text: 'Saved in this browser. The operator can also switch it on request.' })),
  h('fieldset', { class: 'card', 'data-time-zone': '' }, h('legend', { text: 'Times' }),
    /** @type {[import('../time.js').ZoneSetting, string][]} */ ([['local', `Local time: this browser's zone (${[...new Set([localZoneName(), zoneAbbr(now, 'local')])].join(', ')})`], ['utc', 'UTC']]).map(([z, label]) => {
      const id = `${zone}-${z}`;
      return h('div', { class: 'field check' }, h('input', {
        type: 'radio', id, name: zone, value: z, checked: z === zoneSetting(),
        onchange: () => { setZoneSetting(z); ctx.cockpit.flash(`Times now show in ${z === 'utc' ? 'UTC' : 'local time'}.`); ctx.cockpit.mount(); },
      }), h('label', { for: id, text: label }));
    }),
    h('p', { class: 'muted', text: 'Every time in the cockpit shows in this zone, with its name. Schedules run their cron in UTC: their next runs show in UTC, with this zone beside them. Saved in this browser.' })));
}

/** The error codes a model failure can have, in the order charts stack them. */
const MODEL_ERRORS = ['rate_limited', 'model_failure', 'service_failure', 'cancelled'];

/**
 * The operator's last hour: turn latency (median and slowest per 5
 * minutes) and model errors by code, from the daemon's memory.
 * @param {SpaceContext} ctx
 */
function operatorCharts(ctx) {
  const el = h('section', { class: 'card charts', 'aria-labelledby': 'operator-charts-title' }, h('h2', { id: 'operator-charts-title', text: 'Operator, last hour' }), loading());
  ctx.app.operatorActivity('1h').then((a) => {
    if (!ctx.isCurrent()) return;
    const label = (/** @type {number} */ t) => fmtClock(t);
    const zone = zoneAbbr(a.until);
    const turns = a.buckets.reduce((n, b) => n + b.turns, 0);
    const failed = a.buckets.reduce((n, b) => n + b.failed, 0);
    const errors = a.buckets.reduce((n, b) => n + Object.values(b.modelErrors).reduce((x, y) => x + y, 0), 0);
    const slowest = a.buckets.reduce((m, b) => Math.max(m, b.maxMs || 0), 0);
    const codes = [...new Set([...MODEL_ERRORS, ...a.buckets.flatMap((b) => Object.keys(b.modelErrors))])]
      .filter((c) => a.buckets.some((b) => b.modelErrors[c]));
    replace(el, h('h2', { id: 'operator-charts-title', text: 'Operator, last hour' }),
      h('div', { class: 'chart-grid' },
        barChart({
          title: `Turn latency (seconds, per 5 minutes, ${zone})`,
          summary: turns === 0 ? 'No turns ended in the last hour.'
            : `${turns} turn${turns === 1 ? '' : 's'} ended, ${failed} not completed; the slowest took ${(slowest / 1000).toFixed(1)} s.`,
          series: [{ key: 'median', label: 'median s' }, { key: 'slowest', label: 'more, to the slowest' }],
          columns: a.buckets.map((b) => {
            const med = (b.medianMs || 0) / 1000;
            return { label: label(b.start), values: { median: Math.round(med * 10) / 10, slowest: Math.round(((b.maxMs || 0) / 1000 - med) * 10) / 10 } };
          }),
          labelEvery: 3,
        }),
        barChart({
          title: `Model errors (per 5 minutes, ${zone})`,
          summary: errors === 0 ? 'No model call failed in the last hour.' : `${errors} model call${errors === 1 ? '' : 's'} failed: ${codes.map((c) => `${a.buckets.reduce((n, b) => n + (b.modelErrors[c] || 0), 0)} ${c}`).join(', ')}.`,
          series: (codes.length ? codes : ['rate_limited']).map((c) => ({ key: c, label: c })),
          columns: a.buckets.map((b) => ({ label: label(b.start), values: b.modelErrors })),
          labelEvery: 3,
        })),
      h('p', { class: 'muted small', text: 'Kept in the daemon\'s memory since it started (the newest 1024 turns and failures).' }));
  }).catch((e) => ctx.isCurrent() && replace(el, h('h2', { id: 'operator-charts-title', text: 'Operator, last hour' }), errorBox(e)));
  return el;
}
