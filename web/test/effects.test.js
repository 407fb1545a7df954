// Effect validation and the safe Markdown parser: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { Registry } from '../static/js/router.js';
import { validateEffect, targetRoute, checkFresh } from '../static/js/effects.js';
import { parse, inline, safeHref } from '../static/js/markdown.js';

// The registry as the daemon serves it (a copy of routes.Default, checked
// against the Go registry by TestRegistryFixtureIsCurrent in package web).
const reg = new Registry(JSON.parse(readFileSync(new URL('./routes.json', import.meta.url), 'utf8')));

test('effects: valid effects of each kind pass', () => {
  assert.equal(validateEffect(reg, { kind: 'navigate', space: 'mission', params: { view: 'fleet', status: 'failed' } }), null);
  assert.equal(validateEffect(reg, { kind: 'navigate', space: 'system', params: {} }), null);
  assert.equal(validateEffect(reg, { kind: 'select', space: 'library', selection: { playbook: 'p1' } }), null);
  assert.equal(validateEffect(reg, { kind: 'prefill', form: 'schedule', values: { name: 'n', cron: '0 9 * * *', enabled: true } }), null);
  assert.equal(validateEffect(reg, { kind: 'theme', theme: 'dark' }), null);
});

test('effects: refusals carry the right rejection code', () => {
  const code = (e) => validateEffect(reg, e)?.code;
  assert.equal(code({ kind: 'teleport' }), 'unsupported');
  assert.equal(code({ kind: 'navigate', space: 'fleet', params: {} }), 'unsupported', 'fleet is not a space');
  assert.equal(code({ kind: 'navigate', space: 'mission', params: { status: 'exploded' } }), 'invalid_params');
  assert.equal(code({ kind: 'navigate', space: 'mission', params: { colour: 'red' } }), 'invalid_params');
  assert.equal(code({ kind: 'navigate', space: 'schedules', params: { enabled: 'true' } }), 'invalid_params', 'a boolean param must be a boolean');
  assert.equal(code({ kind: 'select', space: 'system', selection: { x: '1' } }), 'unsupported');
  assert.equal(code({ kind: 'select', space: 'mission', selection: { playbook: '1' } }), 'invalid_params');
  assert.equal(code({ kind: 'select', space: 'mission', selection: {} }), 'invalid_params');
  assert.equal(code({ kind: 'prefill', form: 'invoice', values: { a: 1 } }), 'unsupported');
  assert.equal(code({ kind: 'prefill', form: 'playbook', values: { owner: 'me' } }), 'invalid_params');
  assert.equal(code({ kind: 'prefill', form: 'playbook', values: { name: 'x'.repeat(65) } }), 'invalid_params');
  assert.equal(code({ kind: 'prefill', form: 'schedule', values: { enabled: 'yes' } }), 'invalid_params');
  assert.equal(code({ kind: 'theme', theme: 'sepia' }), 'invalid_params');
});

test('effects: target routes match what the server checks', () => {
  const here = { space: 'library', params: { q: 'audit' } };
  assert.equal(targetRoute(reg, { kind: 'navigate', space: 'mission', params: { view: 'fleet', status: 'failed' } }, here), '/?view=fleet&status=failed');
  assert.equal(targetRoute(reg, { kind: 'navigate', space: 'mission', params: { status: 'failed', view: 'fleet' } }, here), '/?view=fleet&status=failed', 'registry order');
  assert.equal(targetRoute(reg, { kind: 'select', space: 'library', selection: { playbook: 'p9' } }, { space: 'library', params: { q: 'a', playbook: 'p1' } }), '/library?q=a&playbook=p9');
  assert.equal(targetRoute(reg, { kind: 'select', space: 'mission', selection: { run: 'r1' } }, here), '/?view=fleet&run=r1');
  assert.equal(targetRoute(reg, { kind: 'select', space: 'history', selection: { event: '7' } }, here), '/history?tab=audit&event=7');
  assert.equal(targetRoute(reg, { kind: 'prefill', form: 'schedule', values: { name: 'n' } }, here), '/schedules');
  assert.equal(targetRoute(reg, { kind: 'prefill', form: 'playbook', values: { name: 'n' } }, here), '/library?q=audit');
  assert.equal(targetRoute(reg, { kind: 'theme', theme: 'dark' }, here), null);
});

test('effects: expired or superseded effects are not applied', () => {
  assert.equal(checkFresh({ expiresAt: 100 }, { nowSeconds: 99, superseded: false }), null);
  assert.equal(checkFresh({ expiresAt: 100 }, { nowSeconds: 100, superseded: false }).code, 'stale_context');
  assert.equal(checkFresh({ expiresAt: 100 }, { nowSeconds: 1, superseded: true }).code, 'stale_context');
});

test('markdown: structure', () => {
  const b = parse('# Title\n\nSome **bold** and *it* and `code`.\n\n- one\n- two\n\n1. a\n2. b\n\n```js\nlet x = 1 < 2;\n```\n> quoted');
  assert.deepEqual(b.map((x) => x.t), ['h', 'p', 'ul', 'ol', 'pre', 'quote']);
  assert.equal(b[4].v, 'let x = 1 < 2;');
  assert.deepEqual(b[1].c.map((x) => x.t), ['text', 'strong', 'text', 'em', 'text', 'code', 'text']);
});

test('markdown: HTML in model text stays text', () => {
  const b = parse('<img src=x onerror=alert(1)> <script>alert(1)</script>');
  assert.equal(b.length, 1);
  assert.deepEqual(b[0].c, [{ t: 'text', v: '<img src=x onerror=alert(1)> <script>alert(1)</script>' }]);
});

test('markdown: only http(s) and same-origin links become links', () => {
  assert.equal(safeHref('javascript:alert(1)'), null);
  assert.equal(safeHref('data:text/html,x'), null);
  assert.equal(safeHref('//evil.example/x'), null);
  assert.equal(safeHref('https://example.com/a'), 'https://example.com/a');
  assert.equal(safeHref('/?view=fleet'), '/?view=fleet');
  const bad = inline('[click](javascript:alert(1))');
  assert.ok(bad.every((x) => x.t !== 'link'));
  assert.deepEqual(inline('[fleet](/?view=fleet)')[0], { t: 'link', href: '/?view=fleet', c: [{ t: 'text', v: 'fleet' }] });
});
