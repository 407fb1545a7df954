// What the cockpit shows of runs over time and of one run's relations: the
// buckets of a chart window in the zone times are shown in (pure, unit-tested),
// the server's counts for them (runs by status, the spread of durations),
// and the runs and audit rows related to one run.

import { isUTC } from './time.js';

/**
 * @typedef {import('./appapi.js').AppApi} AppApi
 * @typedef {import('./appapi.js').Run} Run
 * @typedef {import('./appapi.js').AuditEvent} AuditEvent
 * @typedef {'24h'|'7d'} Window
 * @typedef {{start: number, end: number, label: string, counts: Record<string, number>}} Bucket
 * @typedef {{window: Window, buckets: Bucket[], total: number, partial: boolean}} Activity
 * @typedef {{label: string, min: number, max: number, count: number}} DurationBin
 */

/** Run statuses in the order charts stack them. */
export const STATUSES = ['succeeded', 'failed', 'cancelled', 'running', 'queued'];

const HOUR = 3600;
const DAY = 24 * HOUR;

/**
 * Empty buckets covering a window that ends now: 24 hourly buckets, or 7
 * daily ones, by the clock and calendar of UTC or of the browser's zone.
 * @param {Window} window @param {number} nowSeconds @param {boolean} [utc]
 * @returns {Bucket[]}
 */
export function emptyBuckets(window, nowSeconds, utc = false) {
  const step = window === '24h' ? HOUR : DAY;
  const n = window === '24h' ? 24 : 7;
  const d = new Date(nowSeconds * 1000);
  if (window === '24h') {
    if (utc) d.setUTCMinutes(0, 0, 0);
    else d.setMinutes(0, 0, 0);
  } else if (utc) d.setUTCHours(0, 0, 0, 0);
  else d.setHours(0, 0, 0, 0);
  const lastStart = d.getTime() / 1000;
  /** @type {Bucket[]} */
  const out = [];
  for (let i = n - 1; i >= 0; i--) {
    const start = window === '24h' ? lastStart - i * step : dayStart(lastStart, i, utc);
    const end = window === '24h' ? start + step : dayStart(lastStart, i - 1, utc);
    const at = new Date(start * 1000);
    const label = window === '24h'
      ? String(utc ? at.getUTCHours() : at.getHours()).padStart(2, '0') + ':00'
      : at.toLocaleDateString(undefined, { weekday: 'short', day: 'numeric', timeZone: utc ? 'UTC' : undefined });
    out.push({ start, end, label, counts: Object.fromEntries(STATUSES.map((s) => [s, 0])) });
  }
  return out;
}

/**
 * The midnight `back` days before the one at `lastMidnight`, in UTC or
 * the browser's zone (DST-safe).
 * @param {number} lastMidnight @param {number} back @param {boolean} utc
 */
function dayStart(lastMidnight, back, utc) {
  const d = new Date(lastMidnight * 1000);
  if (utc) d.setUTCDate(d.getUTCDate() - back);
  else d.setDate(d.getDate() - back);
  return d.getTime() / 1000;
}

/**
 * The bucket bounds the server counts between: n+1 instants for n buckets.
 * @param {Bucket[]} buckets
 */
export function edgesOf(buckets) {
  return [...buckets.map((b) => b.start), buckets[buckets.length - 1].end];
}

/**
 * Runs over time by status, and the spread of durations, for a window:
 * the server counts (GET /api/app/runs/activity) between the hour or day
 * boundaries of the zone times are shown in (time.js).
 * @param {AppApi} app @param {Window} window
 * @returns {Promise<Activity & {durations: {bins: DurationBin[], count: number, median: number | null, p90: number | null}}>}
 */
export async function activity(app, window) {
  const buckets = emptyBuckets(window, Date.now() / 1000, isUTC());
  const a = await app.runActivity(edgesOf(buckets));
  a.buckets.forEach((b, i) => { if (buckets[i]) buckets[i].counts = { ...buckets[i].counts, ...b.counts }; });
  const d = a.durations;
  return {
    window, buckets, total: a.total, partial: false,
    durations: { bins: d.bins.map((b) => ({ label: b.label, min: b.minMs, max: b.maxMs ?? Infinity, count: b.count })), count: d.count, median: d.medianMs, p90: d.p90Ms },
  };
}

/**
 * The runs and audit rows related to one run: the run it retried, the runs
 * that retried it, and the audit rows that launched or changed it. A
 * launch or retry row names the runs it created (details.run_ids); rows
 * written before it did are matched by playbook, command and time. An
 * operator's proposal row names the run in its result or target.
 * @param {AppApi} app @param {Run} run
 * @returns {Promise<{retries: Run[], events: AuditEvent[]}>}
 */
export async function runRelations(app, run) {
  const [own, launches, steps, operator, siblings] = await Promise.all([
    app.audit({ targetId: run.id, limit: 50 }),
    app.audit({ targetId: run.retryOf || run.playbookId, limit: 200 }),
    run.workflowId ? app.audit({ targetId: run.workflowId, limit: 200 }) : Promise.resolve({ events: [] }),
    app.audit({ action: 'studio.operator.command', limit: 200 }),
    app.listRuns({ playbook: run.playbookId, limit: 200 }),
  ]);
  const near = (/** @type {AuditEvent} */ e) => Math.abs(e.createdAt - run.createdAt) < 2;
  const events = [
    ...own.events,
    ...[...launches.events, ...steps.events].filter((e) => launched(e, run, near)),
    ...operator.events.filter((e) => mentionsRun(e, run.id)),
  ];
  const seen = new Set();
  const unique = events.filter((e) => !seen.has(e.id) && seen.add(e.id)).sort((a, b) => a.createdAt - b.createdAt || a.id - b.id);
  return { retries: siblings.runs.filter((r) => r.retryOf === run.id), events: unique };
}

/**
 * Whether audit row e created the run.
 * @param {AuditEvent} e @param {Run} run @param {(e: AuditEvent) => boolean} near
 */
function launched(e, run, near) {
  const d = e.details || {};
  if (Array.isArray(d.run_ids)) return d.run_ids.includes(run.id);
  return near(e) && ['launch_playbook', 'retry_run', 'launch_workflow'].includes(d.command_type || d.commandType);
}

/** @param {AuditEvent} e @param {string} runId */
function mentionsRun(e, runId) {
  const d = e.details || {};
  const res = d.result || {};
  return (d.target && d.target.id === runId) || (res.target && res.target.id === runId) || (res.run && res.run.id === runId);
}
