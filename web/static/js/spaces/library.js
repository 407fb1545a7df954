// Library: playbooks with search, detail, create and edit forms, and launch.

import { confirmDialog } from '../dialogs.js';
import { h, replace, fmtTime } from '../dom.js';
import { searchBox, table, field, val, trackDirty, errorText, loading, errorBox, shortId, selectHref, linkTo, revealDetail, detailKeys } from './common.js';

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
  replace(list, loading());
  ctx.app.listPlaybooks({ q: p.q, limit: 200 }).then((page) => {
    if (!ctx.isCurrent()) return;
    replace(list, table({
      caption: 'Playbooks', rows: page.playbooks, key: (b) => b.id, selected: p.playbook,
      onSelect: (b) => ctx.setParams({ playbook: b.id }), href: (b) => selectHref(ctx, { playbook: b.id }),
      empty: p.q ? 'No playbook matches.' : 'No playbooks yet. Choose New playbook to write one.',
      columns: [
        { label: 'Name', cell: (b) => h('strong', { text: b.name }), link: true, class: 'name' },
        { label: 'Description', cell: (b) => b.description, class: 'hide-narrow' },
        { label: 'Version', cell: (b) => 'v' + b.version, class: 'num' },
      ],
    }));
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
  if (prefill) replace(side, playbookForm(ctx, null, prefill.values, side));
  else if (p.playbook) showDetail(ctx, p.playbook, side);
  else replace(side, h('div', { class: 'card muted' }, h('p', { text: 'Select a playbook to see its prompt and launch it, or create a new one.' })));
}

/** @param {SpaceContext} ctx @param {string} ref @param {HTMLElement} side */
async function showDetail(ctx, ref, side) {
  replace(side, loading());
  /** @type {Playbook} */
  let b;
  try {
    b = await ctx.app.getPlaybook(ref);
  } catch (e) {
    if (ctx.isCurrent()) replace(side, errorBox(e));
    return;
  }
  if (!ctx.isCurrent()) return;
  const status = h('p', { class: 'form-error', role: 'alert' });
  const panel = h('section', { class: 'card detail', 'aria-label': 'Playbook ' + b.name },
    h('header', { class: 'detail-head' }, h('h2', { text: b.name }), h('span', { class: 'muted', text: `v${b.version} · updated ${fmtTime(b.updatedAt)}` })),
    h('p', { text: b.description || 'No description.' }),
    h('h3', { text: 'Prompt' }),
    h('pre', { class: 'output', tabindex: '0', text: b.prompt }),
    b.args.length ? [h('h3', { text: 'Arguments' }), h('ul', { class: 'list' }, b.args.map((a) => h('li', null, h('code', { text: a.name }), a.required ? ' (required)' : '', a.default !== undefined && a.default !== null ? ` default “${a.default}”` : '', a.description ? ' — ' + a.description : '')))] : null,
    launchForm(ctx, b),
    status,
    h('div', { class: 'actions' },
      h('button', { type: 'button', 'data-needs': 'operator', text: 'Edit', onclick: () => replace(side, playbookForm(ctx, b, null, side)) }),
      linkTo(ctx, `/?view=fleet&playbook=${encodeURIComponent(b.name)}`, 'Runs of this playbook'),
      h('button', {
        type: 'button', class: 'danger', text: 'Delete',
        onclick: async () => {
          if (!(await confirmDialog({ title: `Delete playbook ${b.name}?`, body: 'Its past runs stay. A playbook that a workflow or schedule uses cannot be deleted.', confirm: 'Delete', danger: true }))) return;
          try {
            await ctx.app.deletePlaybook(b.id);
            ctx.cockpit.flash(`Deleted playbook ${b.name}.`);
            ctx.setParams({ playbook: null });
          } catch (e) { status.textContent = errorText(e); }
        },
      }),
      h('span', { class: 'muted small' }, 'id ', shortId(b.id))));
  detailKeys(panel, ctx, 'playbook', b.id);
  replace(side, panel);
  revealDetail(panel);
}

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
      } catch (e) { status.textContent = errorText(e); }
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
  const status = h('p', { class: 'form-error', role: 'alert' });
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
          await ctx.app.updatePlaybook(b.id, { expectedVersion: b.version, name: val(form, 'name'), description: val(form, 'description'), prompt: val(form, 'prompt'), args });
          ctx.setFormDirty(false);
          ctx.cockpit.flash(`Saved playbook ${val(form, 'name')}.`);
          ctx.cockpit.mount();
        }
      } catch (e) { status.textContent = errorText(e); }
    },
  },
  h('h2', { id: 'pb-form-title', text: b ? `Edit ${b.name}` : 'New playbook' }),
  values ? h('p', { class: 'notice notice-info', text: 'Filled in by the operator. Review before saving; nothing is created until you do.' }) : null,
  field({ label: 'Name', name: 'name', value: b ? b.name : v.name, required: true, maxLength: 64, pattern: '[a-z0-9][a-z0-9._\\-]*', help: 'Lowercase letters, digits, - _ .' }),
  field({ label: 'Description', name: 'description', value: b ? b.description : v.description, textarea: true, rows: 2, maxLength: 2000 }),
  field({ label: 'Prompt', name: 'prompt', value: b ? b.prompt : v.prompt, textarea: true, rows: 8, required: true, help: '{{input}} is the run\'s input; {{name}} an argument.' }),
  field({ label: 'Arguments', name: 'args', value: b ? argsText(b.args) : '', textarea: true, rows: 3, help: 'One per line: name, name! (required) or name=default; # starts a description.' }),
  status,
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary', text: b ? 'Save' : 'Create playbook' }),
    h('button', { type: 'button', text: 'Cancel', onclick: () => { ctx.setFormDirty(false); if (b) showDetail(ctx, b.id, side); else ctx.cockpit.mount(); } })));
  trackDirty(form, ctx);
  setTimeout(() => /** @type {HTMLInputElement | null} */ (form.elements.namedItem('name'))?.focus(), 0);
  return form;
}
