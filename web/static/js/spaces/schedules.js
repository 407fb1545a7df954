// Schedules: list with enable/disable, detail, and a create form with a
// live preview of the next run times of its cron expression.

import { confirmDialog } from '../dialogs.js';
import { h, replace, fmtTime, fmtRelative, uid } from '../dom.js';
import { searchBox, table, field, val, trackDirty, errorText, loading, errorBox, shortId, selectHref, linkTo, revealDetail, detailKeys, closeDetail, keepPlace } from './common.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext @typedef {import('../appapi.js').Schedule} Schedule */

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function mount(el, ctx) {
  const prefill = ctx.takePrefill('schedule');
  const p = ctx.route.params;
  const enabledId = uid('enabled');
  const enabledSel = h('select', {
    id: enabledId, onchange: () => ctx.setParams({ enabled: enabledSel.value || null }, { replace: true }),
  }, h('option', { value: '', text: 'All' }), h('option', { value: 'true', text: 'Enabled', selected: p.enabled === 'true' }), h('option', { value: 'false', text: 'Paused', selected: p.enabled === 'false' }));
  const list = h('div', { class: 'list-pane' });
  const side = h('div', { class: 'detail-pane' });
  el.append(h('div', { class: 'filters', role: 'search' },
    h('div', { class: 'field inline' }, h('label', { for: enabledId, text: 'Show' }), enabledSel),
    searchBox(ctx, 'Search schedules'),
    h('button', { type: 'button', class: 'primary', text: 'New schedule', onclick: () => replace(side, createForm(ctx, null)) })),
  h('div', { class: 'split' }, list, side));
  const load = () => {
    ctx.app.listSchedules({ enabled: p.enabled, q: p.q, limit: 200 }).then((page) => {
      if (!ctx.isCurrent()) return;
      keepPlace(list, () => replace(list, table({
        caption: 'Schedules', rows: page.schedules, key: (s) => s.id, selected: p.schedule, onSelect: (s) => ctx.setParams({ schedule: s.id }),
        href: (s) => selectHref(ctx, { schedule: s.id }),
        empty: p.q || p.enabled ? 'No schedules match.' : 'No schedules yet. Choose New schedule to run a playbook on a timetable.',
        columns: [
          { label: 'Enabled', cell: (s) => toggle(ctx, s, load) },
          { label: 'Name', cell: (s) => h('strong', { text: s.name }), link: true, class: 'name' },
          { label: 'Cron (UTC)', cell: (s) => h('code', { text: s.cron }), class: 'name' },
          { label: 'Playbook', cell: (s) => s.playbookName, class: 'name hide-narrow' },
          { label: 'Next run', cell: (s) => (s.enabled && s.nextRunAt ? fmtRelative(s.nextRunAt) : '—'), class: 'when' },
          { label: 'Last run', cell: (s) => (s.lastRunAt ? fmtRelative(s.lastRunAt) : 'never'), class: 'when hide-narrow' },
        ],
      })));
    }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
  };
  replace(list, loading());
  load();
  // Schedules changed anywhere (another window, the CLI, the scheduler's own runs) update in place.
  ctx.onChange(['schedule.changed', 'run.created'], load);
  if (prefill) replace(side, createForm(ctx, prefill.values));
  else if (p.schedule) showDetail(ctx, p.schedule, side, load);
  else replace(side, h('div', { class: 'card muted' }, h('p', { text: 'Select a schedule, or create one.' })));
}

/** An enable/disable switch. @param {SpaceContext} ctx @param {Schedule} s @param {() => void} reload */
function toggle(ctx, s, reload) {
  const input = h('input', {
    type: 'checkbox', role: 'switch', checked: s.enabled, 'aria-label': `${s.enabled ? 'Pause' : 'Enable'} schedule ${s.name}`,
    onclick: (/** @type {Event} */ ev) => ev.stopPropagation(),
    onchange: async () => {
      input.disabled = true;
      try {
        await ctx.app.setScheduleEnabled(s.id, input.checked, s.version);
        ctx.cockpit.flash(`${input.checked ? 'Enabled' : 'Paused'} schedule ${s.name}.`);
      } catch (e) {
        input.checked = !input.checked;
        ctx.cockpit.flash(errorText(e), 'error');
      }
      reload();
    },
  });
  // The switch lives in a selectable row: its clicks and keys are its own.
  return h('label', {
    class: 'switch',
    onclick: (/** @type {Event} */ ev) => ev.stopPropagation(),
    onkeydown: (/** @type {Event} */ ev) => ev.stopPropagation(),
  }, input, h('span', { class: 'switch-track', 'aria-hidden': 'true' }));
}

/** @param {SpaceContext} ctx @param {string} ref @param {HTMLElement} side @param {() => void} reload */
async function showDetail(ctx, ref, side, reload) {
  replace(side, loading());
  /** @type {Schedule} */
  let s;
  try {
    s = await ctx.app.getSchedule(ref);
  } catch (e) {
    if (ctx.isCurrent()) replace(side, errorBox(e));
    return;
  }
  if (!ctx.isCurrent()) return;
  const status = h('p', { class: 'form-error', role: 'alert' });
  const next = h('div');
  const panel = h('section', { class: 'card detail', 'aria-label': 'Schedule ' + s.name },
    h('header', { class: 'detail-head' }, h('h2', { text: s.name }), h('span', { class: ['badge', s.enabled ? 'badge-succeeded' : 'badge-cancelled'], text: s.enabled ? 'enabled' : 'paused' })),
    h('dl', { class: 'facts' },
      h('dt', { text: 'Cron (UTC)' }), h('dd', null, h('code', { text: s.cron })),
      h('dt', { text: 'Playbook' }), h('dd', null, linkTo(ctx, `/library?playbook=${encodeURIComponent(s.playbookId)}`, s.playbookName)),
      h('dt', { text: 'Input' }), h('dd', { text: s.input || '—' }),
      h('dt', { text: 'Last run' }), h('dd', null, s.lastRunAt ? fmtTime(s.lastRunAt) : 'never', s.lastRunId ? [' ', linkTo(ctx, `/?view=fleet&run=${encodeURIComponent(s.lastRunId)}`, shortId(s.lastRunId))] : null),
      h('dt', { text: 'Skipped' }), h('dd', { text: String(s.skippedRuns || 0) })),
    h('h3', { text: 'Next runs' }), next, status,
    h('div', { class: 'actions' },
      h('button', {
        type: 'button', text: s.enabled ? 'Pause' : 'Enable',
        onclick: async () => {
          try { await ctx.app.setScheduleEnabled(s.id, !s.enabled, s.version); reload(); showDetail(ctx, s.id, side, reload); } catch (e) { status.textContent = errorText(e); }
        },
      }),
      h('button', {
        type: 'button', class: 'danger', text: 'Delete',
        onclick: async () => {
          if (!(await confirmDialog({ title: `Delete schedule ${s.name}?`, body: 'The runs it launched stay.', confirm: 'Delete', danger: true }))) return;
          try { await ctx.app.deleteSchedule(s.id); ctx.setParams({ schedule: null }); } catch (e) { status.textContent = errorText(e); }
        },
      }),
      h('button', { type: 'button', class: 'link', text: 'Close', 'aria-keyshortcuts': 'Escape', onclick: () => closeDetail(ctx, 'schedule', s.id) })));
  detailKeys(panel, ctx, 'schedule', s.id);
  replace(side, panel);
  revealDetail(panel);
  cronPreview(ctx, s.cron, next);
}

/** Renders the next run times of a cron expression. @param {SpaceContext} ctx @param {string} cron @param {HTMLElement} out */
async function cronPreview(ctx, cron, out) {
  if (!cron.trim()) {
    replace(out, h('p', { class: 'muted', text: 'Enter a 5-field cron expression to see the next runs.' }));
    return;
  }
  try {
    const prev = await ctx.app.previewCron(cron.trim(), 5);
    if (!ctx.isCurrent()) return;
    replace(out, h('ol', { class: 'cron-next', 'aria-label': 'Next run times' }, prev.next.map((t) => h('li', null, h('time', { datetime: new Date(t * 1000).toISOString(), text: fmtTime(t) }), ' ', h('span', { class: 'muted', text: `(${fmtRelative(t)})` })))));
  } catch (e) {
    if (ctx.isCurrent()) replace(out, h('p', { class: 'form-error', text: errorText(e) }));
  }
}

/** The create form; prefill values fill it. @param {SpaceContext} ctx @param {Record<string, any> | null} values */
function createForm(ctx, values) {
  const v = values || {};
  const status = h('p', { class: 'form-error', role: 'alert' });
  const preview = h('div', { class: 'cron-preview', 'aria-live': 'polite' });
  /** @type {any} */
  let t = null;
  const playbookId = uid('playbook');
  /** @type {import('../appapi.js').Playbook[]} */
  let playbooks = [];
  const argFields = h('div', { class: 'arg-fields' });
  // The chosen playbook's declared arguments become fields of their own.
  const showArgs = () => {
    const b = playbooks.find((x) => x.name === playbookSel.value);
    replace(argFields, b && b.args.length ? [h('p', { class: 'label', text: 'Arguments' }), b.args.map((a) => field({
      label: a.name, name: 'arg-' + a.name, required: !!a.required && (a.default === undefined || a.default === null),
      placeholder: a.default || '', help: a.description,
    }))] : null);
  };
  const playbookSel = h('select', { id: playbookId, name: 'playbook', required: true, onchange: showArgs }, h('option', { value: '', text: 'Loading playbooks…' }));
  ctx.app.listPlaybooks({ limit: 200 }).then((page) => {
    playbooks = page.playbooks;
    replace(playbookSel, h('option', { value: '', text: 'Choose a playbook' }), page.playbooks.map((b) => h('option', { value: b.name, text: b.name, selected: v.playbook === b.name })));
    if (v.playbook && !page.playbooks.some((b) => b.name === v.playbook)) {
      playbookSel.appendChild(h('option', { value: v.playbook, text: `${v.playbook} (not found)`, selected: true }));
    }
    showArgs();
  }).catch(() => replace(playbookSel, h('option', { value: v.playbook || '', text: v.playbook || 'playbooks unavailable' })));
  const enabledId = uid('enabled');
  const form = h('form', {
    class: 'card form', 'aria-labelledby': 'sc-title', 'data-form': 'schedule',
    onsubmit: async (/** @type {Event} */ ev) => {
      ev.preventDefault();
      status.textContent = '';
      try {
        /** @type {Record<string, string>} */
        const args = {};
        const b = playbooks.find((x) => x.name === playbookSel.value);
        for (const a of (b ? b.args : [])) {
          const value = val(form, 'arg-' + a.name);
          if (value !== '') args[a.name] = value;
        }
        const created = await ctx.app.createSchedule({
          name: val(form, 'name'), cron: val(form, 'cron'), playbook: playbookSel.value, input: val(form, 'input'), args,
          enabled: /** @type {HTMLInputElement} */ (form.elements.namedItem('enabled')).checked,
        });
        ctx.setFormDirty(false);
        ctx.cockpit.flash(`Created schedule ${val(form, 'name')}.`);
        ctx.setParams({ schedule: (created && (created.id || (created.schedule && created.schedule.id))) || val(form, 'name') });
      } catch (e) { status.textContent = errorText(e); }
    },
  },
  h('h2', { id: 'sc-title', text: 'New schedule' }),
  values ? h('p', { class: 'notice notice-info', text: 'Filled in by the operator. Review before saving; nothing is created until you do.' }) : null,
  field({ label: 'Name', name: 'name', value: v.name, required: true, maxLength: 64, pattern: '[a-z0-9][a-z0-9._\\-]*' }),
  field({
    label: 'Cron expression (UTC)', name: 'cron', value: v.cron, required: true, maxLength: 100, placeholder: '0 9 * * 1-5',
    help: 'minute hour day-of-month month day-of-week',
    oninput: (ev) => {
      clearTimeout(t);
      const value = /** @type {HTMLInputElement} */ (ev.target).value;
      t = setTimeout(() => cronPreview(ctx, value, preview), 250);
    },
  }),
  h('div', { class: 'field' }, h('span', { class: 'label', text: 'Next runs' }), preview),
  h('div', { class: 'field' }, h('label', { for: playbookId, text: 'Playbook *' }), playbookSel),
  argFields,
  field({ label: 'Input', name: 'input', value: v.input, textarea: true, rows: 2 }),
  h('div', { class: 'field check' }, h('input', { id: enabledId, type: 'checkbox', name: 'enabled', checked: v.enabled === undefined ? true : !!v.enabled }), h('label', { for: enabledId, text: 'Enabled' })),
  status,
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary', text: 'Create schedule' }),
    h('button', { type: 'button', text: 'Cancel', onclick: () => { ctx.setFormDirty(false); ctx.cockpit.mount(); } })));
  trackDirty(form, ctx);
  cronPreview(ctx, v.cron || '', preview);
  return form;
}
