// Unit tests of the cockpit's time formats: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { fmtShort, fmtTime } from '../static/js/dom.js';

// Local times, whatever the machine's zone: the formats follow its calendar.
const at = (y, mo, d, h, mi) => new Date(y, mo - 1, d, h, mi).getTime() / 1000;
const NOW = at(2026, 11, 30, 18, 30);

test('fmtShort: the time today, the day and time this year, the date before', () => {
  const today = fmtShort(at(2026, 11, 30, 9, 5), NOW);
  assert.ok(/09|9/.test(today) && today.includes('05'), today);
  assert.ok(!today.includes('2026') && !today.includes('Nov'), `today needs no date: ${today}`);

  const thisYear = fmtShort(at(2026, 3, 7, 14, 45), NOW);
  assert.ok(thisYear.includes('Mar') && thisYear.includes('7') && thisYear.includes('45'), thisYear);
  assert.ok(!thisYear.includes('2026'), `this year needs no year: ${thisYear}`);

  const before = fmtShort(at(2025, 12, 31, 23, 59), NOW);
  assert.ok(before.includes('2025') && before.includes('Dec') && !before.includes('59'), before);

  assert.equal(fmtShort(null, NOW), '—');
  assert.ok(fmtShort(at(2026, 11, 30, 9, 5), NOW).length < fmtTime(at(2026, 11, 30, 9, 5)).length);
});
