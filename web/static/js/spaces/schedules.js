// Schedules: list with enable/disable, detail, and a form to create one or
// edit one (name, cron, playbook and its declared arguments, input,
// enabled) with a live preview of the next run times of its cron
// expression. Crons run in UTC: the times say so, with the chosen zone
// beside them (time.js).

import { confirmDialog } from '../dialogs.js';
import { h, replace, uid } from '../dom.js';
import { fmtTime, fmtRelative, fmtCronTime } from '../time.js';
import { errorText, showError } from '../api.js';
import { loading, errorBox } from './loading.js';
import { searchBox, filterBar } from './filters.js';
import { selectHref, linkTo } from './links.js';
import { table, revealDetail, detailKeys, closeDetail } from './table.js';
import { field, val, trackDirty } from './form.js';
import { shortId } from './cells.js';
import { keepPlace } from './keep-place.js';
import { followEdits, versionConflict, versionLine, keptMine } from './edits.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext @typedef {import('../appapi.js').Schedule} Schedule @typedef {import('../appapi.js').Playbook} Playbook */

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
  /** @type {{refresh: () => void} | null} the schedule shown beside the list */
  let open = null;
  el.append(filterBar({
    active: p.enabled ? 1 : 0,
    fields: [h('div', { class: 'field inline' }, h('label', { for: enabledId, text: 'Show' }), enabledSel)],
    search: searchBox(ctx, 'Search schedules'),
    actions: [h('button', { type: 'button', class: 'primary', text: 'New schedule', onclick: () => { open = null; replace(side, scheduleForm(ctx, null, null, side, () => {})); } })],
  }),
  h('div', { class: 'split' }, list, side));
  const load = () => {
    ctx.app.listSchedules({ enabled: p.enabled, q: p.q, limit: 200 }).then((page) => {
      if (!ctx.isCurrent()) return;
      keepPlace(list, () => replace(list, table({
        caption: 'Schedules', rows: page.schedules, key: (s) => s.id, alias: (s) => s.name, selected: p.schedule, onSelect: (s) => ctx.setParams({ schedule: s.id }),
        href: (s) => selectHref(ctx, { schedule: s.id }),
        empty: p.q || p.enabled ? 'No schedules match.' : 'No schedules yet. Choose New schedule to run a playbook on a timetable.',
        columns: [
          { label: 'Enabled', cell: (s) => toggle(ctx, s, load) },
          { label: 'Name', cell: (s) => h('strong', { text: s.name }), link: true, class: 'name' },
          { label: 'Cron (UTC)', cell: (s) => h('code', { text: s.cron }), class: 'name' },
          { label: 'Playbook', cell: (s) => s.playbookName, class: 'name hide-narrow' },
          { label: 'Next run', cell: (s) => (s.enabled && s.nextRunAt ? h('time', { datetime: new Date(s.nextRunAt * 1000).toISOString(), title: fmtCronTime(s.nextRunAt), text: fmtRelative(s.nextRunAt) }) : '—'), class: 'when' },
          { label: 'Last run', cell: (s) => (s.lastRunAt ? h('time', { datetime: new Date(s.lastRunAt * 1000).toISOString(), title: fmtTime(s.lastRunAt), text: fmtRelative(s.lastRunAt) }) : 'never'), class: 'when hide-narrow' },
        ],
      })));
    }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
  };
  replace(list, loading());
  load();
  if (prefill) replace(side, scheduleForm(ctx, null, prefill.values, side, () => {}));
  else if (p.schedule) {
    const id = p.schedule;
    open = { refresh: () => showDetail(ctx, id, side, load, true) };
    showDetail(ctx, id, side, load, false);
  } else replace(side, h('div', { class: 'card muted' }, h('p', { text: 'Select a schedule, or create one.' })));
  // Schedules changed anywhere (another window, the CLI, the scheduler's
  // own runs) update in place; an edit in progress is never overwritten.
  ctx.onChange(['schedule.changed', 'run.created'], () => {
    load();
    // The open schedule is read again (it may be named by its name, not its id).
    if (open) open.refresh();
  });
}

/** An enable/disable switch. @param {SpaceContext} ctx @param {Schedule} s @param {() => void} reload */
function toggle(ctx, s, reload) {
  const input = h('input', {
    type: 'checkbox', role: 'switch', checked: s.enabled, 'aria-label': `${s.enabled ? 'Pause' : 'Enable'} schedule ${s.name}`, 'data-needs': 'change',
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

/**
 * The detail of a schedule. again: a live refresh, which leaves an open
 * edit form alone (its own follower says what changed).
 * @param {SpaceContext} ctx @param {string} ref @param {HTMLElement} side @param {() => void} reload @param {boolean} again
 */
async function showDetail(ctx, ref, side, reload, again) {
  if (again && side.querySelector('form[data-form=schedule]')) {
    const follow = editing.get(side);
    if (follow) follow.check();
    return;
  }
  if (!again) replace(side, loading());
  /** @type {Schedule} */
  let s;
  try {
    s = await ctx.app.getSchedule(ref);
  } catch (e) {
    if (ctx.isCurrent()) replace(side, errorBox(e));
    return;
  }
  if (!ctx.isCurrent() || (again && side.querySelector('form[data-form=schedule]'))) return;
  const status = h('p', { class: 'form-error', role: 'alert' });
  const next = h('div');
  const panel = h('section', { class: 'card detail', 'aria-label': 'Schedule ' + s.name, 'data-schedule-version': String(s.version) },
    h('header', { class: 'detail-head' }, h('h2', { text: s.name }), h('span', { class: ['badge', s.enabled ? 'badge-succeeded' : 'badge-cancelled'], 'data-schedule-state': s.enabled ? 'enabled' : 'paused', text: s.enabled ? 'enabled' : 'paused' })),
    h('dl', { class: 'facts' },
      h('dt', { text: 'Cron (UTC)' }), h('dd', null, h('code', { 'data-cron': '', text: s.cron })),
      h('dt', { text: 'Playbook' }), h('dd', null, linkTo(ctx, `/library?playbook=${encodeURIComponent(s.playbookId)}`, s.playbookName)),
      h('dt', { text: 'Arguments' }), h('dd', null, Object.keys(s.args || {}).length ? h('dl', { class: 'args' }, Object.entries(s.args).map(([k, v]) => [h('dt', null, h('code', { text: k })), h('dd', { text: v })])) : 'none'),
      h('dt', { text: 'Input' }), h('dd', { text: s.input || '—' }),
      h('dt', { text: 'Last run' }), h('dd', null, s.lastRunAt ? fmtTime(s.lastRunAt) : 'never', s.lastRunId ? [' ', linkTo(ctx, `/?view=fleet&run=${encodeURIComponent(s.lastRunId)}`, shortId(s.lastRunId))] : null),
      h('dt', { text: 'Skipped' }), h('dd', { text: String(s.skippedRuns || 0) })),
    h('h3', { text: 'Next runs' }), next, status,
    h('div', { class: 'actions' },
      h('button', { type: 'button', 'data-action': 'edit-schedule', text: 'Edit', onclick: () => replace(side, scheduleForm(ctx, s, null, side, reload)) }),
      h('button', {
        type: 'button', 'data-action': s.enabled ? 'pause-schedule' : 'enable-schedule', text: s.enabled ? 'Pause' : 'Enable',
        onclick: async () => {
          try { await ctx.app.setScheduleEnabled(s.id, !s.enabled, s.version); reload(); showDetail(ctx, s.id, side, reload, true); } catch (e) { showError(status, e); }
        },
      }),
      h('button', {
        type: 'button', class: 'danger', text: 'Delete',
        onclick: async () => {
          if (!(await confirmDialog({ title: `Delete schedule ${s.name}?`, body: 'The runs it launched stay.', confirm: 'Delete', danger: true }))) return;
          try { await ctx.app.deleteSchedule(s.id); ctx.setParams({ schedule: null }); } catch (e) { showError(status, e); }
        },
      }),
      h('button', { type: 'button', class: 'link', 'data-needs': 'read', text: 'Close', 'aria-keyshortcuts': 'Escape', onclick: () => closeDetail(ctx, 'schedule', s.id) })));
  detailKeys(panel, ctx, 'schedule', s.id);
  if (again) keepPlace(side, () => replace(side, panel));
  else {
    replace(side, panel);
    revealDetail(panel);
  }
  cronPreview(ctx, s.cron, next);
}

/** The edit forms' followers, by the pane they show in. @type {WeakMap<HTMLElement, ReturnType<typeof followEdits>>} */
const editing = new WeakMap();

/** Renders the next run times of a cron expression, in UTC with the chosen zone beside. @param {SpaceContext} ctx @param {string} cron @param {HTMLElement} out */
async function cronPreview(ctx, cron, out) {
  if (!cron.trim()) {
    replace(out, h('p', { class: 'muted', text: 'Enter a 5-field cron expression (UTC) to see the next runs.' }));
    return;
  }
  try {
    const prev = await ctx.app.previewCron(cron.trim(), 5);
    if (!ctx.isCurrent()) return;
    replace(out, h('ol', { class: 'cron-next', 'aria-label': 'Next run times' }, prev.next.map((t) => h('li', null, h('time', { datetime: new Date(t * 1000).toISOString(), text: fmtCronTime(t) }), ' ', h('span', { class: 'muted', text: `(${fmtRelative(t)})` })))));
  } catch (e) {
    if (ctx.isCurrent()) replace(out, h('p', { class: 'form-error', text: errorText(e) }));
  }
}

/**
 * The form that creates a schedule (s null; prefill values fill it) or
 * edits one: every field is sent when it changed, with the version it
 * read; the enabled switch is its own command, sent after.
 * @param {SpaceContext} ctx @param {Schedule | null} s @param {Record<string, any> | null} values @param {HTMLElement} side @param {() => void} reload
 */
function scheduleForm(ctx, s, values, side, reload) {
  const v = values || {};
  /** @type {Schedule | null} the version the form is based on */
  let base = s;
  const status = h('p', { class: 'form-error', role: 'alert' });
  const conflict = h('div', { class: 'conflict-slot' });
  const preview = h('div', { class: 'cron-preview', 'aria-live': 'polite' });
  /** @type {any} */
  let t = null;
  const playbookId = uid('playbook');
  /** @type {Playbook[]} */
  let playbooks = [];
  const argFields = h('div', { class: 'arg-fields' });
  /** @type {Record<string, string>} the arguments as they were read (the fields start with them) */
  const startArgs = s ? { ...s.args } : {};
  // The chosen playbook's declared arguments become fields of their own.
  const showArgs = () => {
    const b = playbooks.find((x) => x.name === playbookSel.value);
    const typed = /** @type {Record<string, string>} */ ({});
    argFields.querySelectorAll('input').forEach((i) => { typed[/** @type {HTMLInputElement} */ (i).name.slice(4)] = /** @type {HTMLInputElement} */ (i).value; });
    replace(argFields, b && b.args.length ? [h('p', { class: 'label', text: 'Arguments' }), b.args.map((a) => field({
      label: a.name, name: 'arg-' + a.name, value: typed[a.name] ?? startArgs[a.name] ?? '', required: !!a.required && (a.default === undefined || a.default === null),
      placeholder: a.default || '', help: [a.description, a.default !== undefined && a.default !== null ? `Empty: the default “${a.default}” is used.` : ''].filter(Boolean).join(' '),
    }))] : null);
  };
  const playbookSel = h('select', { id: playbookId, name: 'playbook', required: true, onchange: showArgs }, h('option', { value: '', text: 'Loading playbooks…' }));
  const wanted = s ? s.playbookName : v.playbook;
  ctx.app.listPlaybooks({ limit: 200 }).then((page) => {
    playbooks = page.playbooks;
    replace(playbookSel, h('option', { value: '', text: 'Choose a playbook' }), page.playbooks.map((b) => h('option', { value: b.name, text: b.name, selected: wanted === b.name })));
    if (wanted && !page.playbooks.some((b) => b.name === wanted)) {
      playbookSel.appendChild(h('option', { value: wanted, text: `${wanted} (not found)`, selected: true }));
    }
    showArgs();
  }).catch(() => replace(playbookSel, h('option', { value: wanted || '', text: wanted || 'playbooks unavailable' })));
  const enabledId = uid('enabled');
  /** The arguments the fields give (empty ones left to their defaults). */
  const argsNow = () => {
    /** @type {Record<string, string>} */
    const args = {};
    const b = playbooks.find((x) => x.name === playbookSel.value);
    for (const a of (b ? b.args : [])) {
      const value = val(form, 'arg-' + a.name);
      if (value !== '') args[a.name] = value;
    }
    return args;
  };
  const enabledBox = () => /** @type {HTMLInputElement} */ (form.elements.namedItem('enabled')).checked;
  const form = h('form', {
    class: 'card form', 'aria-labelledby': 'sc-title', 'data-form': 'schedule',
    onsubmit: async (/** @type {Event} */ ev) => {
      ev.preventDefault();
      status.textContent = '';
      replace(conflict);
      try {
        if (!base) {
          const created = await ctx.app.createSchedule({
            name: val(form, 'name'), cron: val(form, 'cron'), playbook: playbookSel.value, input: val(form, 'input'), args: argsNow(), enabled: enabledBox(),
          });
          ctx.setFormDirty(false);
          ctx.cockpit.flash(`Created schedule ${val(form, 'name')}.`);
          ctx.setParams({ schedule: (created && (created.id || (created.schedule && created.schedule.id))) || val(form, 'name') });
          return;
        }
        /** @type {Record<string, any>} */
        const patch = { expectedVersion: base.version };
        if (val(form, 'name') !== base.name) patch.name = val(form, 'name');
        if (val(form, 'cron') !== base.cron) patch.cron = val(form, 'cron');
        if (playbookSel.value !== base.playbookName) patch.playbook = playbookSel.value;
        if (val(form, 'input') !== base.input) patch.input = val(form, 'input');
        const args = argsNow();
        if (patch.playbook || JSON.stringify(Object.entries(args).sort()) !== JSON.stringify(Object.entries(base.args || {}).sort())) patch.args = args;
        let saved = base;
        if (Object.keys(patch).length > 1) saved = await ctx.app.updateSchedule(base.id, patch);
        if (enabledBox() !== saved.enabled) saved = await ctx.app.setScheduleEnabled(base.id, enabledBox(), saved.version);
        if (saved === base) { status.textContent = 'Nothing to save: the schedule is as you opened it.'; return; }
        ctx.setFormDirty(false);
        ctx.cockpit.flash(`Saved schedule ${saved.name}.`);
        reload();
        showDetail(ctx, saved.id, side, reload, false);
      } catch (e) {
        if (base && versionConflict(e)) follow.conflict().catch((x) => { status.textContent = errorText(x); });
        else showError(status, e);
      }
    },
  },
  h('h2', { id: 'sc-title', text: s ? `Edit ${s.name}` : 'New schedule' }),
  s ? versionLine(s) : null,
  conflict,
  values ? h('p', { class: 'notice notice-info', text: 'Filled in by the operator. Review before saving; nothing is created until you do.' }) : null,
  field({ label: 'Name', name: 'name', value: s ? s.name : v.name, required: true, maxLength: 64, pattern: '[a-z0-9][a-z0-9._\\-]*' }),
  field({
    label: 'Cron expression (UTC)', name: 'cron', value: s ? s.cron : v.cron, required: true, maxLength: 100, placeholder: '0 9 * * 1-5',
    help: 'minute hour day-of-month month day-of-week, in UTC',
    oninput: (ev) => {
      clearTimeout(t);
      const value = /** @type {HTMLInputElement} */ (ev.target).value;
      t = setTimeout(() => cronPreview(ctx, value, preview), 250);
    },
  }),
  h('div', { class: 'field' }, h('span', { class: 'label', text: 'Next runs' }), preview),
  h('div', { class: 'field' }, h('label', { for: playbookId, text: 'Playbook *' }), playbookSel),
  argFields,
  field({ label: 'Input', name: 'input', value: s ? s.input : v.input, textarea: true, rows: 2 }),
  h('div', { class: 'field check' }, h('input', { id: enabledId, type: 'checkbox', name: 'enabled', checked: s ? s.enabled : v.enabled === undefined ? true : !!v.enabled }), h('label', { for: enabledId, text: 'Enabled' })),
  status,
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary', text: s ? 'Save' : 'Create schedule' }),
    // Cancel says what it does: the edits are dropped, not asked about.
    h('button', { type: 'button', 'data-needs': 'read', text: 'Cancel', onclick: () => { ctx.setFormDirty(false); if (s) showDetail(ctx, s.id, side, reload, false); else ctx.cockpit.mount(); } })));
  trackDirty(form, ctx);
  const follow = followEdits({
    ctx, kind: 'schedule', name: s ? s.name : '', slot: conflict,
    version: () => (base ? base.version : 0),
    load: () => ctx.app.getSchedule(s ? s.id : ''),
    dirty: ctx.formDirty,
    reload: (latest) => { ctx.setFormDirty(false); replace(side, scheduleForm(ctx, latest, null, side, reload)); },
    keepMine: (latest) => {
      base = latest;
      keptMine(form, latest);
      ctx.setFormDirty(true);
    },
    diff: (latest) => {
      const args = (/** @type {Record<string, string>} */ a) => Object.entries(a || {}).sort().map(([k, x]) => `${k}=${x}`).join(', ');
      return [
        { label: 'Name', theirs: latest.name, mine: val(form, 'name') },
        { label: 'Cron (UTC)', theirs: latest.cron, mine: val(form, 'cron') },
        { label: 'Playbook', theirs: latest.playbookName, mine: playbookSel.value },
        { label: 'Arguments', theirs: args(latest.args), mine: args(argsNow()) },
        { label: 'Input', theirs: latest.input, mine: val(form, 'input') },
        { label: 'Enabled', theirs: latest.enabled ? 'yes' : 'no', mine: enabledBox() ? 'yes' : 'no' },
      ];
    },
  });
  if (s) editing.set(side, follow);
  cronPreview(ctx, s ? s.cron : v.cron || '', preview);
  return form;
}
