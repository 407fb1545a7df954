// Unit tests of fitting a list box's row: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

const { fitRow } = await import('../static/js/fit-text.js');

// Every character 1 wide: widths are lengths.
const len = (/** @type {string} */ s) => [...s].length;

test('fitRow keeps a row that fits as it is', () => {
  assert.equal(fitRow('Release notes', ' · 07:43 PM UTC', 40, len), 'Release notes · 07:43 PM UTC');
});

test('fitRow ellipsizes the title and keeps the count and the time whole', () => {
  const tail = ' · 1 waiting · 07:43 PM UTC';
  const row = fitRow('Launch the audit of studio/operator', tail, 40, len);
  assert.ok(row.endsWith('…' + tail), row);
  assert.ok(row.startsWith('Launch the'), row);
  assert.ok(len(row) <= 40, `${row} is ${len(row)} wide`);
  // As much of the title as fits: one more character would not.
  assert.equal(len(row), 40, row);
});

test('fitRow cuts at a code point and drops a space before the ellipsis', () => {
  assert.equal(fitRow('ab 😀😀😀', ' · t', 9, len), 'ab 😀… · t');
  assert.equal(fitRow('ab cdef', ' · t', 8, len), 'ab… · t');
});

test('fitRow keeps the tail when nothing of the title fits', () => {
  assert.equal(fitRow('Launch', ' · 07:43 PM UTC', 10, len), '… · 07:43 PM UTC');
});
