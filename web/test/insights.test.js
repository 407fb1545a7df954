// Unit tests of what the charts show: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { emptyBuckets, edgesOf, runRelations } from '../static/js/insights.js';
import { niceTicks, labelled } from '../static/js/charts.js';

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

test('insights: the edges the server counts between are the buckets\' bounds', () => {
  const day = emptyBuckets('24h', NOW);
  const e = edgesOf(day);
  assert.equal(e.length, 25);
  assert.equal(e[0], day[0].start);
  assert.equal(e[24], day[23].end);
  for (let i = 1; i < e.length; i++) assert.ok(e[i] > e[i - 1]);
});

test('charts: axis labels every nth column counted from the newest, never two side by side', () => {
  const shown = (n, every) => [...Array(n).keys()].filter((i) => labelled(i, n, every));
  assert.deepEqual(shown(24, 3), [2, 5, 8, 11, 14, 17, 20, 23]);
  assert.deepEqual(shown(7, 1), [0, 1, 2, 3, 4, 5, 6]);
  for (let n = 2; n < 40; n++) {
    const s = shown(n, 3);
    assert.equal(s[s.length - 1], n - 1);
    for (let i = 1; i < s.length; i++) assert.equal(s[i] - s[i - 1], 3);
  }
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

test('runRelations: a launch row names its runs, so a neighbour launched in the same second is not this run\'s', async () => {
  const run = { id: 'run-b', playbookId: 'pb', retryOf: null, createdAt: 1000.5 };
  const rows = [
    { id: 1, createdAt: 1000.1, details: { command_type: 'launch_playbook', run_ids: ['run-a'] } },
    { id: 2, createdAt: 1000.4, details: { command_type: 'launch_playbook', run_ids: ['run-b'] } },
    { id: 3, createdAt: 1000.3, details: { command_type: 'launch_playbook' } }, // older rows: by time
    { id: 4, createdAt: 900, details: { command_type: 'launch_playbook' } },
  ];
  const app = {
    audit: async (/** @type {any} */ q) => ({ events: q.targetId === 'pb' ? rows : [] }),
    listRuns: async () => ({ runs: [] }),
  };
  const rel = await runRelations(/** @type {any} */ (app), /** @type {any} */ (run));
  assert.deepEqual(rel.events.map((e) => e.id), [3, 2]);
});

test('insights: buckets by the UTC clock when times show in UTC', () => {
  const saved = process.env.TZ;
  process.env.TZ = 'Asia/Kolkata'; // UTC+5:30: local hours and days differ from UTC's
  try {
    const local = emptyBuckets('24h', NOW);
    const utc = emptyBuckets('24h', NOW, true);
    assert.equal(utc[23].start, Date.UTC(2026, 10, 30, 12) / 1000);
    assert.equal(utc[23].label, '12:00');
    assert.equal(local[23].start, Date.UTC(2026, 10, 30, 12, 30) / 1000);
    assert.equal(local[23].label, '18:00');
    const week = emptyBuckets('7d', NOW, true);
    assert.equal(week[6].start, Date.UTC(2026, 10, 30) / 1000);
    assert.equal(week[0].start, Date.UTC(2026, 10, 24) / 1000);
    assert.equal(emptyBuckets('7d', NOW)[6].start, Date.UTC(2026, 10, 29, 18, 30) / 1000);
  } finally {
    process.env.TZ = saved;
  }
});
