// Library: playbooks with search, detail, create and edit forms, and launch.

import { confirmDialog } from '../dialogs.js';
import { h, replace } from '../dom.js';
import { fmtTime } from '../time.js';
import { errorText, showError } from '../api.js';
import { loading, errorBox } from './loading.js';
import { searchBox } from './filters.js';
import { selectHref, linkTo } from './links.js';
import { table, revealDetail, detailKeys } from './table.js';
import { field, val, trackDirty } from './form.js';
import { shortId } from './cells.js';
import { keepPlace } from './keep-place.js';
import { followEdits, versionConflict, versionLine, keptMine } from './edits.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext @typedef {import('../appapi.js').Playbook} Playbook @typedef {import('../appapi.js').PlaybookArg} PlaybookArg */

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function mount(el, ctx) {
  const prefill = ctx.takePrefill('playbook');
  const p = ctx.route.params;
  const list = h('div', { class: 'list-pane' });
  const side = h('div', { class: 'detail-pane' });
  el.append(h('div', { class: 'filters', role: 'search' }, searchBox(ctx, 'Search playbooks'),
    h('button', { type: 'button', class: 'primary', text: 'New playbook', onclick: () => replace(side, playbookForm(ctx, null, null, side)) })),
    h('div', { class: 'split' }, list, side));
  const load = () => ctx.app.listPlaybooks({ q: p.q, limit: 200 }).then((page) => {
    if (!ctx.isCurrent()) return;
    keepPlace(list, () => replace(list, table({
      caption: 'Playbooks', rows: page.playbooks, key: (b) => b.id, alias: (b) => b.name, selected: p.playbook,
      onSelect: (b) => ctx.setParams({ playbook: b.id }), href: (b) => selectHref(ctx, { playbook: b.id }),
      empty: p.q ? 'No playbook matches.' : 'No playbooks yet. Choose New playbook to write one.',
      columns: [
        { label: 'Name', cell: (b) => h('strong', { text: b.name }), link: true, class: 'name' },
        { label: 'Description', cell: (b) => b.description, class: 'hide-narrow' },
        { label: 'Version', cell: (b) => 'v' + b.version, class: 'num' },
      ],
    })));
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
  replace(list, loading());
  load();
  if (prefill) replace(side, playbookForm(ctx, null, prefill.values, side));
  else if (p.playbook) showDetail(ctx, p.playbook, side);
  else replace(side, h('div', { class: 'card muted' }, h('p', { text: 'Select a playbook to see its prompt and launch it, or create a new one.' })));
  // Playbooks saved anywhere update the list and the open one in place; an
  // edit or a launch being typed is never overwritten.
  ctx.onChange(['playbook.changed'], () => {
    load();
    if (p.playbook && !prefill) showDetail(ctx, p.playbook, side, true);
  });
}

/**
 * The detail of a playbook. again: a live refresh, in place; an open edit
 * form is left to its follower (edits.js), a launch form with typed values
 * is kept and the newer version offered.
 * @param {SpaceContext} ctx @param {string} ref @param {HTMLElement} side @param {boolean} [again]
 */
async function showDetail(ctx, ref, side, again = false) {
  if (again) {
    const follow = editing.get(side);
    if (follow && side.querySelector('form[data-form=playbook]')) return follow.check();
    if (side.querySelector('form[data-form=playbook]')) return;
  } else replace(side, loading());
  /** @type {Playbook} */
  let b;
  try {
    b = await ctx.app.getPlaybook(ref);
  } catch (e) {
    if (ctx.isCurrent()) replace(side, errorBox(e));
    return;
  }
  if (!ctx.isCurrent()) return;
  const shown = /** @type {HTMLElement | null} */ (side.querySelector('[data-playbook-version]'));
  if (again && shown && shown.dataset.playbookVersion === String(b.version)) return;
  if (again && shown && [...side.querySelectorAll('.subform input, .subform textarea')].some((i) => /** @type {HTMLInputElement} */ (i).value !== '')) {
    // A launch being typed: say there is a newer version, keep the form.
    const slot = /** @type {HTMLElement | null} */ (side.querySelector('.newer-slot'));
    if (slot) replace(slot, h('p', { class: 'notice notice-info', role: 'status', 'data-newer': '' }, h('span', { text: `This playbook changed: now v${b.version}. ` }),
      h('button', { type: 'button', class: 'small', 'data-needs': 'read', text: 'Show it (drops what you typed)', onclick: () => showDetail(ctx, b.id, side) })));
    return;
  }
  const status = h('p', { class: 'form-error', role: 'alert' });
  const panel = h('section', { class: 'card detail', 'aria-label': 'Playbook ' + b.name, 'data-playbook-version': String(b.version) },
    h('header', { class: 'detail-head' }, h('h2', { text: b.name }), h('span', { class: 'muted', text: `v${b.version} · updated ${fmtTime(b.updatedAt)}` })),
    h('div', { class: 'newer-slot' }),
    h('p', { text: b.description || 'No description.' }),
    h('h3', { text: 'Prompt' }),
    h('pre', { class: 'output', tabindex: '0', text: b.prompt }),
    b.args.length ? [h('h3', { text: 'Arguments' }), h('ul', { class: 'list' }, b.args.map((a) => h('li', null, h('code', { text: a.name }), a.required ? ' (required)' : '', a.default !== undefined && a.default !== null ? ` default “${a.default}”` : '', a.description ? ' — ' + a.description : '')))] : null,
    launchForm(ctx, b),
    status,
    h('div', { class: 'actions' },
      h('button', { type: 'button', 'data-needs': 'change', 'data-action': 'edit-playbook', text: 'Edit', onclick: () => replace(side, playbookForm(ctx, b, null, side)) }),
      linkTo(ctx, `/?view=fleet&playbook=${encodeURIComponent(b.name)}`, 'Runs of this playbook'),
      h('button', {
        type: 'button', class: 'danger', text: 'Delete',
        onclick: async () => {
          if (!(await confirmDialog({ title: `Delete playbook ${b.name}?`, body: 'Its past runs stay. A playbook that a workflow or schedule uses cannot be deleted.', confirm: 'Delete', danger: true }))) return;
          try {
            await ctx.app.deletePlaybook(b.id);
            ctx.cockpit.flash(`Deleted playbook ${b.name}.`);
            ctx.setParams({ playbook: null });
          } catch (e) { showError(status, e); }
        },
      }),
      h('span', { class: 'muted small' }, 'id ', shortId(b.id))));
  detailKeys(panel, ctx, 'playbook', b.id);
  if (again) keepPlace(side, () => replace(side, panel));
  else {
    replace(side, panel);
    revealDetail(panel);
  }
}

/** The edit forms' followers, by the pane they show in. @type {WeakMap<HTMLElement, ReturnType<typeof followEdits>>} */
const editing = new WeakMap();

/** The launch form of a playbook: input and its declared arguments. @param {SpaceContext} ctx @param {Playbook} b */
function launchForm(ctx, b) {
  const status = h('p', { class: 'form-error', role: 'alert' });
  const form = h('form', {
    class: 'subform', 'aria-label': 'Launch ' + b.name,
    onsubmit: async (/** @type {Event} */ ev) => {
      ev.preventDefault();
      /** @type {Record<string, string>} */
      const args = {};
      for (const a of b.args) {
        const v = val(form, 'arg-' + a.name);
        if (v !== '') args[a.name] = v;
      }
      try {
        const r = await ctx.app.launchRun({ playbook: b.id, input: val(form, 'input'), args });
        const id = r && (r.id || (r.run && r.run.id));
        ctx.cockpit.flash(`Launched ${b.name}.`);
        ctx.cockpit.go(id ? `/?view=fleet&run=${encodeURIComponent(id)}` : '/?view=fleet');
      } catch (e) { showError(status, e); }
    },
  },
  h('h3', { text: 'Launch' }),
  field({ label: 'Input', name: 'input', textarea: true, rows: 2, help: 'What the run works on.' }),
  b.args.map((a) => field({ label: a.name, name: 'arg-' + a.name, required: a.required && (a.default === undefined || a.default === null), placeholder: a.default || '', help: a.description })),
  status,
  h('button', { type: 'submit', class: 'primary', text: 'Launch run' }));
  return form;
}

/** @param {PlaybookArg[]} args */
function argsText(args) {
  return args.map((a) => a.name + (a.required ? '!' : '') + (a.default !== undefined && a.default !== null ? '=' + a.default : '') + (a.description ? ' # ' + a.description : '')).join('\n');
}

/** @param {string} text @returns {PlaybookArg[]} */
function parseArgs(text) {
  /** @type {PlaybookArg[]} */
  const out = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const [spec, ...desc] = line.split('#');
    const m = spec.trim().match(/^([a-z][a-z0-9_]*)(!?)(?:=(.*))?$/);
    if (!m) throw new Error(`argument line "${line}" is not name, name! or name=default`);
    /** @type {PlaybookArg} */
    const a = { name: m[1] };
    if (m[2]) a.required = true;
    if (m[3] !== undefined) a.default = m[3].trim();
    if (desc.length) a.description = desc.join('#').trim();
    out.push(a);
  }
  return out;
}

/**
 * Create (b null) or edit a playbook. Prefill values fill the create form.
 * @param {SpaceContext} ctx @param {Playbook | null} b @param {Record<string, any> | null} values @param {HTMLElement} side
 */
function playbookForm(ctx, b, values, side) {
  const v = values || {};
  /** @type {Playbook | null} the version the form is based on */
  let base = b;
  const status = h('p', { class: 'form-error', role: 'alert' });
  const conflict = h('div', { class: 'conflict-slot' });
  const form = h('form', {
    class: 'card form', 'aria-labelledby': 'pb-form-title', 'data-form': 'playbook',
    onsubmit: async (/** @type {Event} */ ev) => {
      ev.preventDefault();
      status.textContent = '';
      try {
        const args = parseArgs(val(form, 'args'));
        if (!b) {
          const created = await ctx.app.createPlaybook({ name: val(form, 'name'), description: val(form, 'description'), prompt: val(form, 'prompt'), args });
          ctx.setFormDirty(false);
          ctx.cockpit.flash(`Created playbook ${val(form, 'name')}.`);
          ctx.setParams({ playbook: (created && (created.id || (created.playbook && created.playbook.id))) || val(form, 'name') });
        } else {
          const saved = await ctx.app.updatePlaybook(b.id, { expectedVersion: base ? base.version : b.version, name: val(form, 'name'), description: val(form, 'description'), prompt: val(form, 'prompt'), args });
          ctx.setFormDirty(false);
          ctx.cockpit.flash(`Saved playbook ${val(form, 'name')}.`);
          showDetail(ctx, (saved && saved.id) || b.id, side);
        }
      } catch (e) {
        if (b && versionConflict(e)) follow.conflict().catch((x) => { status.textContent = errorText(x); });
        else showError(status, e);
      }
    },
  },
  h('h2', { id: 'pb-form-title', text: b ? `Edit ${b.name}` : 'New playbook' }),
  b ? versionLine(b) : null,
  conflict,
  values ? h('p', { class: 'notice notice-info', text: 'Filled in by the operator. Review before saving; nothing is created until you do.' }) : null,
  field({ label: 'Name', name: 'name', value: b ? b.name : v.name, required: true, maxLength: 64, pattern: '[a-z0-9][a-z0-9._\\-]*', help: 'Lowercase letters, digits, - _ .' }),
  field({ label: 'Description', name: 'description', value: b ? b.description : v.description, textarea: true, rows: 2, maxLength: 2000 }),
  field({ label: 'Prompt', name: 'prompt', value: b ? b.prompt : v.prompt, textarea: true, rows: 8, required: true, help: '{{input}} is the run\'s input; {{name}} an argument.' }),
  field({ label: 'Arguments', name: 'args', value: b ? argsText(b.args) : '', textarea: true, rows: 3, help: 'One per line: name, name! (required) or name=default; # starts a description.' }),
  status,
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary', text: b ? 'Save' : 'Create playbook' }),
    // Cancel says what it does: the edits are dropped, not asked about.
    h('button', { type: 'button', 'data-needs': 'read', text: 'Cancel', onclick: () => { ctx.setFormDirty(false); if (b) showDetail(ctx, b.id, side); else ctx.cockpit.mount(); } })));
  trackDirty(form, ctx);
  const follow = followEdits({
    ctx, kind: 'playbook', name: b ? b.name : '', slot: conflict,
    version: () => (base ? base.version : 0),
    load: () => ctx.app.getPlaybook(b ? b.id : ''),
    dirty: ctx.formDirty,
    reload: (latest) => { ctx.setFormDirty(false); replace(side, playbookForm(ctx, latest, null, side)); },
    keepMine: (latest) => {
      base = latest;
      keptMine(form, latest);
      ctx.setFormDirty(true);
    },
    diff: (latest) => [
      { label: 'Name', theirs: latest.name, mine: val(form, 'name') },
      { label: 'Description', theirs: latest.description, mine: val(form, 'description') },
      { label: 'Prompt', theirs: latest.prompt, mine: val(form, 'prompt') },
      { label: 'Arguments', theirs: argsText(latest.args), mine: val(form, 'args') },
    ],
  });
  if (b) editing.set(side, follow);
  setTimeout(() => /** @type {HTMLInputElement | null} */ (form.elements.namedItem('name'))?.focus(), 0);
  return form;
}
