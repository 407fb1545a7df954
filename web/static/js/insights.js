// What the cockpit derives from the runs list and the audit trail: runs
// over time by status, the spread of run durations, and the runs and audit
// rows related to one run. Computed in the browser from /api/app for now;
// a server-side statistics endpoint can replace activity() without touching
// the charts (they take the shapes returned here). The bucketing functions
// are pure and unit-tested.

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
 * daily ones. Labels use the browser's time zone.
 * @param {Window} window @param {number} nowSeconds
 * @returns {Bucket[]}
 */
export function emptyBuckets(window, nowSeconds) {
  const step = window === '24h' ? HOUR : DAY;
  const n = window === '24h' ? 24 : 7;
  const d = new Date(nowSeconds * 1000);
  if (window === '24h') d.setMinutes(0, 0, 0);
  else d.setHours(0, 0, 0, 0);
  const lastStart = d.getTime() / 1000;
  /** @type {Bucket[]} */
  const out = [];
  for (let i = n - 1; i >= 0; i--) {
    const start = window === '24h' ? lastStart - i * step : dayStart(lastStart, i);
    const end = window === '24h' ? start + step : dayStart(lastStart, i - 1);
    const at = new Date(start * 1000);
    const label = window === '24h'
      ? String(at.getHours()).padStart(2, '0') + ':00'
      : at.toLocaleDateString(undefined, { weekday: 'short', day: 'numeric' });
    out.push({ start, end, label, counts: Object.fromEntries(STATUSES.map((s) => [s, 0])) });
  }
  return out;
}

/** The local midnight `back` days before the one at `lastMidnight` (DST-safe). @param {number} lastMidnight @param {number} back */
function dayStart(lastMidnight, back) {
  const d = new Date(lastMidnight * 1000);
  d.setDate(d.getDate() - back);
  return d.getTime() / 1000;
}

/**
 * Counts runs by the bucket of their creation time and their status.
 * @param {Pick<Run, 'createdAt' | 'status'>[]} runs @param {Window} window @param {number} nowSeconds
 * @returns {Bucket[]}
 */
export function bucketRuns(runs, window, nowSeconds) {
  const buckets = emptyBuckets(window, nowSeconds);
  for (const r of runs) {
    const b = buckets.find((x) => r.createdAt >= x.start && r.createdAt < x.end);
    if (b) b.counts[r.status] = (b.counts[r.status] || 0) + 1;
  }
  return buckets;
}

/** Bin edges of the duration spread, in milliseconds. */
const DURATION_BINS = [
  { label: '< 1 s', min: 0, max: 1000 },
  { label: '1–5 s', min: 1000, max: 5000 },
  { label: '5–30 s', min: 5000, max: 30000 },
  { label: '30 s–2 min', min: 30000, max: 120000 },
  { label: '2–10 min', min: 120000, max: 600000 },
  { label: '≥ 10 min', min: 600000, max: Infinity },
];

/**
 * The spread of durations of finished runs.
 * @param {Pick<Run, 'durationMs'>[]} runs
 * @returns {{bins: DurationBin[], count: number, median: number | null, p90: number | null}}
 */
export function durationSpread(runs) {
  const ds = runs.map((r) => r.durationMs).filter((d) => typeof d === 'number').map(Number).sort((a, b) => a - b);
  const bins = DURATION_BINS.map((b) => ({ ...b, count: ds.filter((d) => d >= b.min && d < b.max).length }));
  const q = (/** @type {number} */ p) => (ds.length ? ds[Math.min(ds.length - 1, Math.floor(p * ds.length))] : null);
  return { bins, count: ds.length, median: q(0.5), p90: q(0.9) };
}

/** At most this many runs are read for a chart (five pages). */
const MAX_RUNS = 1000;

/**
 * Runs created in the window, newest first, up to MAX_RUNS.
 * @param {AppApi} app @param {Window} window @param {number} nowSeconds
 * @returns {Promise<{runs: Run[], partial: boolean}>}
 */
async function runsSince(app, window, nowSeconds) {
  const since = Math.floor(nowSeconds - (window === '24h' ? DAY : 7 * DAY) - DAY);
  /** @type {Run[]} */
  const runs = [];
  /** @type {string | undefined} */
  let cursor;
  do {
    const page = await app.listRuns({ since: String(since), limit: 200, cursor });
    runs.push(...page.runs);
    cursor = page.nextCursor || undefined;
  } while (cursor && runs.length < MAX_RUNS);
  return { runs, partial: !!cursor };
}

/**
 * Runs over time by status, and the spread of durations, for a window.
 * @param {AppApi} app @param {Window} window
 * @returns {Promise<Activity & {durations: ReturnType<typeof durationSpread>}>}
 */
export async function activity(app, window) {
  const now = Date.now() / 1000;
  const { runs, partial } = await runsSince(app, window, now);
  const buckets = bucketRuns(runs, window, now);
  const inWindow = runs.filter((r) => r.createdAt >= buckets[0].start);
  return { window, buckets, total: inWindow.length, partial, durations: durationSpread(inWindow.filter((r) => r.endedAt)) };
}

/**
 * The runs and audit rows related to one run: the run it retried, the runs
 * that retried it, and the audit rows that launched or changed it. The
 * cockpit's launch rows name the playbook, not the run, so a launch row is
 * matched by playbook, command and time; an operator's proposal row by the
 * run in its result or target.
 * @param {AppApi} app @param {Run} run
 * @returns {Promise<{retries: Run[], events: AuditEvent[]}>}
 */
export async function runRelations(app, run) {
  const [own, launches, operator, siblings] = await Promise.all([
    app.audit({ targetId: run.id, limit: 50 }),
    app.audit({ targetId: run.retryOf || run.playbookId, limit: 200 }),
    app.audit({ action: 'studio.operator.command', limit: 200 }),
    app.listRuns({ playbook: run.playbookId, limit: 200 }),
  ]);
  const near = (/** @type {AuditEvent} */ e) => Math.abs(e.createdAt - run.createdAt) < 2;
  const events = [
    ...own.events,
    ...launches.events.filter((e) => near(e) && ['launch_playbook', 'retry_run'].includes(e.details && (e.details.command_type || e.details.commandType))),
    ...operator.events.filter((e) => mentionsRun(e, run.id)),
  ];
  const seen = new Set();
  const unique = events.filter((e) => !seen.has(e.id) && seen.add(e.id)).sort((a, b) => a.createdAt - b.createdAt || a.id - b.id);
  return { retries: siblings.runs.filter((r) => r.retryOf === run.id), events: unique };
}

/** @param {AuditEvent} e @param {string} runId */
function mentionsRun(e, runId) {
  const d = e.details || {};
  const res = d.result || {};
  return (d.target && d.target.id === runId) || (res.target && res.target.id === runId) || (res.run && res.run.id === runId);
}
