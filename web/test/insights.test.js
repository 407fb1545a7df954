// Unit tests of what the charts show: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { bucketRuns, emptyBuckets, durationSpread, STATUSES } from '../static/js/insights.js';
import { niceTicks } from '../static/js/charts.js';

process.env.TZ = 'UTC';
const NOW = Date.UTC(2026, 10, 30, 12, 34, 56) / 1000; // Monday 30 November 2026, 12:34:56 UTC

test('insights: 24 hourly buckets ending with the current hour, 7 daily ones ending today', () => {
  const day = emptyBuckets('24h', NOW);
  assert.equal(day.length, 24);
  assert.equal(day[23].start, Date.UTC(2026, 10, 30, 12) / 1000);
  assert.equal(day[23].label, '12:00');
  assert.equal(day[0].label, '13:00');
  for (let i = 1; i < day.length; i++) assert.equal(day[i].start, day[i - 1].end);
  const week = emptyBuckets('7d', NOW);
  assert.equal(week.length, 7);
  assert.equal(week[6].start, Date.UTC(2026, 10, 30) / 1000);
  assert.equal(week[0].start, Date.UTC(2026, 10, 24) / 1000);
});

test('insights: runs land in the bucket of their creation, by status; older runs are left out', () => {
  const at = (h, m = 0) => Date.UTC(2026, 10, 30, h, m) / 1000;
  const runs = [
    { createdAt: at(12, 5), status: 'failed' },
    { createdAt: at(12, 59), status: 'succeeded' },
    { createdAt: at(11, 0), status: 'succeeded' },
    { createdAt: at(11, 59), status: 'running' },
    { createdAt: at(13) - 25 * 3600, status: 'failed' }, // 25 hours ago: outside
  ];
  const b = bucketRuns(runs, '24h', NOW);
  assert.deepEqual(b[23].counts, { succeeded: 1, failed: 1, cancelled: 0, running: 0, queued: 0 });
  assert.deepEqual(b[22].counts, { succeeded: 1, failed: 0, cancelled: 0, running: 1, queued: 0 });
  const total = b.reduce((n, x) => n + STATUSES.reduce((m, s) => m + x.counts[s], 0), 0);
  assert.equal(total, 4);
  const w = bucketRuns(runs, '7d', NOW);
  assert.equal(w[6].counts.succeeded + w[6].counts.failed + w[6].counts.running, 4);
  assert.equal(w[5].counts.failed, 1);
});

test('insights: the spread of durations, with median and 90th percentile', () => {
  const runs = [200, 800, 1500, 4000, 6000, 45000, 200000, 900000, null].map((d) => ({ durationMs: d }));
  const s = durationSpread(runs);
  assert.equal(s.count, 8);
  assert.deepEqual(s.bins.map((b) => b.count), [2, 2, 1, 1, 1, 1]);
  assert.equal(s.median, 6000);
  assert.equal(s.p90, 900000);
  assert.deepEqual(durationSpread([]), { bins: s.bins.map((b) => ({ ...b, count: 0 })), count: 0, median: null, p90: null });
});

test('charts: axis ticks are round and reach the maximum', () => {
  assert.deepEqual(niceTicks(1), [0, 1]);
  assert.deepEqual(niceTicks(3), [0, 1, 2, 3]);
  assert.deepEqual(niceTicks(7), [0, 2, 4, 6, 8]);
  assert.deepEqual(niceTicks(42), [0, 20, 40, 60]);
  for (let m = 1; m < 500; m += 7) {
    const t = niceTicks(m);
    assert.ok(t[t.length - 1] >= m && t.length <= 7, `${m}: ${t}`);
  }
});
