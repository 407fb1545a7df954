// Unit tests of the cockpit's time formats: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

// A zone that is not UTC (and has daylight saving), so the two settings differ.
process.env.TZ = 'America/New_York';
const { fmtShort, fmtTime, fmtCronTime, fmtClock, zoneAbbr, zoneSetting, setZoneSetting } = await import('../static/js/time.js');

// Local times, whatever the machine's zone: the formats follow its calendar.
const at = (y, mo, d, h, mi) => new Date(y, mo - 1, d, h, mi).getTime() / 1000;
const NOW = at(2026, 11, 30, 18, 30);

test('fmtShort: the time today, the day and time this year, the date before', () => {
  const today = fmtShort(at(2026, 11, 30, 9, 5), NOW, 'local');
  assert.ok(/09|9/.test(today) && today.includes('05'), today);
  assert.ok(!today.includes('2026') && !today.includes('Nov'), `today needs no date: ${today}`);

  const thisYear = fmtShort(at(2026, 3, 7, 14, 45), NOW, 'local');
  assert.ok(thisYear.includes('Mar') && thisYear.includes('7') && thisYear.includes('45'), thisYear);
  assert.ok(!thisYear.includes('2026'), `this year needs no year: ${thisYear}`);

  const before = fmtShort(at(2025, 12, 31, 23, 59), NOW, 'local');
  assert.ok(before.includes('2025') && before.includes('Dec') && !before.includes('59'), before);

  assert.equal(fmtShort(null, NOW), '—');
  assert.ok(fmtShort(at(2026, 11, 30, 9, 5), NOW, 'local').length < fmtTime(at(2026, 11, 30, 9, 5), 'local').length);
});

test('every absolute time names its zone, in the zone chosen', () => {
  const t = Date.UTC(2026, 11, 7, 4, 0) / 1000; // 04:00 UTC, 23:00 the day before in New York
  assert.match(fmtTime(t, 'utc'), /04:00:00.*UTC/);
  assert.match(fmtTime(t, 'local'), /11:00:00 PM EST|23:00:00 EST/);
  assert.match(fmtShort(t, t, 'utc'), /04:00.*UTC/);
  assert.match(fmtShort(t, t, 'local'), /EST/);
  assert.equal(zoneAbbr(t, 'utc'), 'UTC');
  assert.equal(zoneAbbr(t, 'local'), 'EST');
  assert.equal(zoneAbbr(Date.UTC(2026, 6, 7) / 1000, 'local'), 'EDT');
  // "Today" is the chosen zone's today: 04:00 UTC is still yesterday in New York.
  const noon = Date.UTC(2026, 11, 7, 12, 0) / 1000;
  assert.ok(!/Dec/.test(fmtShort(t, noon, 'utc')), fmtShort(t, noon, 'utc'));
  assert.match(fmtShort(t, noon, 'local'), /Dec 6/);
  assert.equal(fmtClock(t, 'utc'), '04:00');
  assert.equal(fmtClock(t, 'local'), '23:00');
});

test('a cron run shows in UTC, its own zone, with the chosen zone beside it', () => {
  const t = Date.UTC(2026, 11, 7, 4, 0) / 1000;
  const utc = fmtCronTime(t, 'utc');
  assert.match(utc, /Mon.*Dec 7.*04:00.*UTC/);
  assert.ok(!/EST/.test(utc), utc);
  const both = fmtCronTime(t, 'local');
  assert.match(both, /Dec 7.*04:00.*UTC \(Sun, Dec 6, (11:00 PM|23:00) EST\)/);
});

test('the setting is UTC or local, local by default, remembered', () => {
  assert.equal(zoneSetting(), 'local');
  const stored = new Map();
  globalThis.localStorage = /** @type {any} */ ({ getItem: (k) => stored.get(k) ?? null, setItem: (k, v) => stored.set(k, v) });
  setZoneSetting('utc');
  assert.equal(zoneSetting(), 'utc');
  assert.equal(stored.get('studio.timezone'), 'utc');
  setZoneSetting(/** @type {any} */ ('mars'));
  assert.equal(zoneSetting(), 'local');
});
