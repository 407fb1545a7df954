// The route registry, URL state (router.js) and where the cockpit is
// (route-state.js): node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { Registry, parseRoute, routeOf, checkParam, checkQueryValue, paramString } from '../static/js/router.js';
import { RouteState } from '../static/js/route-state.js';

// The registry as the daemon serves it (a copy of routes.Default, checked
// against the Go registry by TestRegistryFixtureIsCurrent in package web).
const json = JSON.parse(readFileSync(new URL('./routes.json', import.meta.url), 'utf8'));
const reg = new Registry(json);

test('registry: six spaces with their paths', () => {
  assert.deepEqual(reg.spaces.map((s) => s.path), ['/', '/designer', '/library', '/history', '/schedules', '/system']);
});

test('routes: parse keeps valid params and drops unknown or invalid ones', () => {
  const r = parseRoute(reg, '/', '?view=fleet&status=failed&bogus=1&trigger=nope');
  assert.equal(r.route.space.id, 'mission');
  assert.deepEqual(r.route.params, { view: 'fleet', status: 'failed' });
  assert.deepEqual(r.dropped.sort(), ['bogus', 'trigger']);
  assert.equal(parseRoute(reg, '/nowhere', ''), null);
  assert.deepEqual(parseRoute(reg, '/schedules', '?enabled=true').route.params, { enabled: 'true' });
  assert.deepEqual(parseRoute(reg, '/schedules', '?enabled=yes').dropped, ['enabled']);
});

test('routes: routeOf writes the params as a query, booleans as true/false', () => {
  assert.equal(routeOf(reg.space('mission'), { view: 'fleet', status: 'failed' }), '/?view=fleet&status=failed');
  assert.equal(routeOf(reg.space('schedules'), { enabled: false }), '/schedules?enabled=false');
  assert.equal(routeOf(reg.space('library'), {}), '/library');
  assert.equal(routeOf(reg.space('library'), { q: 'a b&c' }), '/library?q=a+b%26c');
});

test('params: types as the server checks them', () => {
  const mission = reg.space('mission');
  const status = mission.params.find((p) => p.name === 'status');
  assert.equal(checkParam(status, 'failed'), null);
  assert.notEqual(checkParam(status, 'exploded'), null);
  assert.notEqual(checkParam(mission.params.find((p) => p.name === 'q'), ''), null);
  assert.notEqual(checkParam(mission.params.find((p) => p.name === 'q'), 'x'.repeat(201)), null);
});

test('registry: a registry without spaces is refused; lookups by id, path and form', () => {
  for (const bad of [null, {}, { spaces: 'mission' }, { spaces: [] }]) {
    assert.throws(() => new Registry(bad), /no spaces/, JSON.stringify(bad));
  }
  assert.equal(reg.space('library').path, '/library');
  assert.equal(reg.space('nowhere'), undefined);
  assert.equal(reg.spaceAt('/schedules').id, 'schedules');
  assert.equal(reg.spaceAt('/schedules/'), undefined, 'paths match exactly');
  assert.equal(reg.form('schedule').space, 'schedules');
  assert.equal(reg.form('nothing'), undefined);
  const bare = new Registry({ version: 1, spaces: json.spaces });
  assert.deepEqual([bare.forms, bare.themes], [[], []], 'forms and themes default to none');
});

test('params: the URL form of a value, as the server writes it', () => {
  assert.equal(paramString(['a', 'b']), 'a,b');
  assert.equal(paramString(3.9), '3');
  assert.equal(paramString(-3.9), '-3');
  assert.equal(paramString(true), 'true');
  assert.equal(paramString('x'), 'x');
});

test('params: each type checked as the server checks it', () => {
  const p = (type, extra = {}) => ({ name: 'p', type, description: '', ...extra });
  const ok = (param, v) => assert.equal(checkParam(param, v), null, `${param.type} ${JSON.stringify(v)}`);
  const bad = (param, v) => assert.match(checkParam(param, v) || '', /^p /, `${param.type} ${JSON.stringify(v)}`);
  ok(p('string'), 'x'.repeat(200));
  bad(p('string'), 'é'.repeat(101)); // 101 characters, 202 bytes: the limit is in bytes
  ok(p('string'), 'é'.repeat(100));
  bad(p('string'), '');
  bad(p('string'), 7);
  const id = p('id', { pattern: '^[a-z]+$' });
  ok(id, 'abc');
  bad(id, 'ab1');
  bad(p('id'), 'abc'); // no pattern matches nothing
  ok(p('enum', { values: ['a', 'b'] }), 'b');
  bad(p('enum', { values: ['a', 'b'] }), 'c');
  bad(p('enum'), 'a');
  ok(p('boolean'), false);
  bad(p('boolean'), 'false');
  ok(p('integer'), -4);
  bad(p('integer'), 4.5);
  bad(p('integer'), '4');
  ok(p('list'), ['a', 'b']);
  bad(p('list'), ['a', 1]);
  bad(p('list'), 'a');
  assert.match(checkParam(p('date'), 'x'), /type this cockpit does not know \(date\)/);
});

test('params: URL query values are strings; booleans and integers by their spelling', () => {
  const p = (type, extra = {}) => ({ name: 'p', type, description: '', ...extra });
  assert.equal(checkQueryValue(p('boolean'), 'true'), null);
  assert.equal(checkQueryValue(p('boolean'), 'false'), null);
  assert.notEqual(checkQueryValue(p('boolean'), 'yes'), null);
  assert.equal(checkQueryValue(p('integer'), '-12'), null);
  assert.notEqual(checkQueryValue(p('integer'), '1.5'), null);
  assert.notEqual(checkQueryValue(p('integer'), '1e3'), null);
  assert.equal(checkQueryValue(p('list'), ''), null);
  assert.equal(checkQueryValue(p('enum', { values: ['a'] }), 'a'), null);
  assert.notEqual(checkQueryValue(p('enum', { values: ['a'] }), 'b'), null);
});

test('routes: routeOf leaves out empty values; parseRoute reads back what it wrote, for every space', () => {
  assert.equal(routeOf(reg.space('mission'), { view: 'fleet', status: '', run: null, q: undefined }), '/?view=fleet');
  assert.equal(routeOf(reg.space('mission'), { status: 'failed', view: 'fleet' }), '/?status=failed&view=fleet', 'in the given order');
  const sample = (p) => ({ enum: (p.values || [])[0], id: 'ab-1.c', string: 'a b&c=é', boolean: 'true' })[p.type];
  for (const space of reg.spaces) {
    const params = Object.fromEntries(space.params.map((p) => [p.name, sample(p)]));
    const at = routeOf(space, params);
    const q = at.indexOf('?');
    const back = parseRoute(reg, q < 0 ? at : at.slice(0, q), q < 0 ? '' : at.slice(q));
    assert.ok(back, at);
    assert.equal(back.route.space.id, space.id);
    assert.deepEqual(back.route.params, params, at);
    assert.deepEqual(back.dropped, []);
  }
});

// --- RouteState -----------------------------------------------------------------

test('route state: entering an address makes its route current; another space drops the unsaved-edits mark', () => {
  const nav = new RouteState(reg);
  assert.equal(nav.enter('/nowhere', '?view=fleet'), null);
  assert.equal(nav.route, null, 'an address with no space changes nothing');
  const r = nav.enter('/', '?view=fleet&bogus=1');
  assert.deepEqual(r.dropped, ['bogus']);
  assert.equal(nav.route, r.route);
  nav.formDirty = true;
  nav.enter('/', '?view=overview');
  assert.equal(nav.formDirty, true, 'the same space keeps the mark: its view decides when it mounts');
  nav.enter('/library', '');
  assert.equal(nav.formDirty, false);
});

test('route state: an address with no space shows the first space home, and the snapshot says so', () => {
  const nav = new RouteState(reg);
  nav.enter('/history', '?tab=audit');
  nav.lose();
  assert.equal(nav.lost, true);
  assert.deepEqual(nav.route, { space: reg.spaces[0], params: {} });
  assert.deepEqual(nav.snapshot('/no/such/page'), { space: 'mission', route: '/', filters: {} });
  nav.enter('/library', '');
  assert.equal(nav.lost, false);
  assert.equal(nav.snapshot('/library').route, '/library');
});

test('route state: params patched and canonicalized', () => {
  const nav = new RouteState(reg);
  assert.equal(nav.patched({ q: 'x' }), null, 'no route yet');
  assert.equal(nav.canonicalize({ run: 'x' }), null);
  nav.enter('/', '?view=fleet&status=failed&run=abc');
  assert.equal(nav.patched({ status: null, q: 'deploy', run: '' }), '/?view=fleet&q=deploy');
  assert.deepEqual(nav.route.params, { view: 'fleet', status: 'failed', run: 'abc' }, 'patching moves nothing by itself');
  const route = nav.route;
  assert.equal(nav.canonicalize({ run: 'abcdef12-full' }), '/?view=fleet&status=failed&run=abcdef12-full');
  assert.equal(nav.route, route, 'in place: the mounted view holds this object');
  assert.equal(route.params.run, 'abcdef12-full');
});

test('route state: a prefill is taken once, by its own form', () => {
  const nav = new RouteState(reg);
  nav.prefill = { form: 'schedule', values: { name: 'nightly' } };
  assert.equal(nav.takePrefill('playbook'), null);
  assert.deepEqual(nav.takePrefill('schedule'), { form: 'schedule', values: { name: 'nightly' } });
  assert.equal(nav.takePrefill('schedule'), null);
});

test('route state: the context snapshot puts selection params apart from filters', () => {
  const nav = new RouteState(reg);
  nav.enter('/history', '?tab=runs&status=failed&run=r1&event=9');
  assert.deepEqual(nav.snapshot('/history?tab=runs&status=failed&run=r1&event=9'), {
    space: 'history', route: '/history?tab=runs&status=failed&run=r1&event=9',
    filters: { tab: 'runs', status: 'failed' }, selection: { run: 'r1', event: '9' },
  });
  nav.enter('/system', '?tab=health');
  const snap = nav.snapshot('/system?tab=health');
  assert.deepEqual(snap, { space: 'system', route: '/system?tab=health', filters: { tab: 'health' } });
  assert.ok(!('selection' in snap), 'no selection key when nothing is selected');
});
