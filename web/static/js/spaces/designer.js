// Designer: workflows (ordered playbook steps) with an editor form; a
// selected workflow can be launched (one run per step, in order) or
// deleted, and shows its recent runs step by step.

import { h, replace, badge } from '../dom.js';
import { confirmDialog } from '../dialogs.js';
import { errorText, showError } from '../api.js';
import { loading, errorBox } from './loading.js';
import { searchBox } from './filters.js';
import { selectHref, linkTo } from './links.js';
import { table } from './table.js';
import { field, val, trackDirty } from './form.js';
import { runCells, shortId } from './cells.js';
import { keepPlace } from './keep-place.js';
import { followEdits, versionConflict, versionLine, keptMine } from './edits.js';
import { errorSentence } from '../words.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext @typedef {import('../appapi.js').Workflow} Workflow @typedef {import('../appapi.js').PlaybookArg} PlaybookArg */

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function mount(el, ctx) {
  const prefill = ctx.takePrefill('workflow');
  const p = ctx.route.params;
  const list = h('div', { class: 'list-pane' });
  const side = h('div', { class: 'detail-pane' });
  /** @type {Map<string, PlaybookArg[]>} the playbooks' declared arguments, by name */
  const declared = new Map();
  const playbooks = ctx.app.listPlaybooks({ limit: 200 }).then((page) => {
    for (const pb of page.playbooks) declared.set(pb.name, pb.args || []);
    return declared;
  }).catch(() => declared); // the server checks the steps on save
  /** @type {{follow: ReturnType<typeof followEdits>, id: string, refreshRuns: () => void} | null} */
  let open = null;
  el.append(h('div', { class: 'filters', role: 'search' }, searchBox(ctx, 'Search workflows'),
    h('button', { type: 'button', class: 'primary', text: 'New workflow', onclick: () => playbooks.then(() => { open = null; replace(side, editor(ctx, null, null, declared, show).form); }) })),
    h('div', { class: 'split' }, list, side));
  const loadList = () => ctx.app.listWorkflows({ q: p.q, limit: 200 }).then((page) => {
    if (!ctx.isCurrent()) return;
    keepPlace(list, () => replace(list, table({
      caption: 'Workflows', rows: page.workflows, key: (w) => w.id, alias: (w) => w.name, selected: p.workflow,
      onSelect: (w) => ctx.setParams({ workflow: w.id }), href: (w) => selectHref(ctx, { workflow: w.id }),
      empty: p.q ? 'No workflow matches.' : h('p', { text: 'No workflows yet. A workflow runs playbooks one after another: choose New workflow and list the playbooks in order.' }),
      columns: [
        { label: 'Name', cell: (w) => h('strong', { text: w.name }), link: true, class: 'name' },
        { label: 'Steps', cell: (w) => w.steps.map((s) => s.playbookName).join(' → ') },
        { label: 'Version', cell: (w) => 'v' + w.version, class: 'num' },
      ],
    })));
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
  /** Shows a workflow: its actions, its editor and its runs by step. @param {Workflow} w */
  const show = (w) => {
    const ed = editor(ctx, w, null, declared, show);
    const runs = stepRuns(ctx, w);
    open = { follow: ed.follow, id: w.id, refreshRuns: runs.refresh };
    keepPlace(side, () => replace(side, actions(ctx, w), ed.form, runs.el));
  };
  replace(list, loading());
  loadList();
  if (prefill) playbooks.then(() => ctx.isCurrent() && replace(side, editor(ctx, null, prefill.values, declared, show).form));
  else if (p.workflow) {
    replace(side, loading());
    Promise.all([ctx.app.getWorkflow(p.workflow), playbooks]).then(([w]) => ctx.isCurrent() && show(w))
      .catch((e) => ctx.isCurrent() && replace(side, errorBox(e)));
  } else replace(side, h('div', { class: 'card muted' }, h('p', { text: 'Select a workflow to edit it, or create a new one.' })));
  // Saved anywhere (another browser, the CLI, a confirmed proposal): the
  // list and the open workflow follow; an edit in progress is never
  // overwritten (edits.js).
  ctx.onChange(['workflow.changed', 'playbook.changed'], (events) => {
    loadList();
    if (events.some((e) => e.type === 'playbook.changed' || e.type === 'reset')) {
      ctx.app.listPlaybooks({ limit: 200 }).then((page) => { for (const pb of page.playbooks) declared.set(pb.name, pb.args || []); }).catch(() => {});
    }
    if (open && events.some((e) => e.id === open?.id || e.type === 'reset')) open.follow.check();
  });
  ctx.onChange(['run.created', 'run.changed'], () => { if (open) open.refreshRuns(); });
}

/**
 * @typedef {{playbook: string, input: string, args: Record<string, string>}} StepValue
 * A step as the editor holds it and as the API takes it (WorkflowStepInput).
 */

/** @param {import('../appapi.js').WorkflowStep} s @returns {StepValue} */
function stepValue(s) {
  return { playbook: s.playbookName, input: s.input || '', args: { ...(s.args || {}) } };
}

/** The steps a prefill carries: playbook names in order ("a, b"), or step objects. @param {any} v @returns {StepValue[]} */
function prefillSteps(v) {
  if (Array.isArray(v)) return v.map((x) => (typeof x === 'string' ? { playbook: x, input: '', args: {} } : { playbook: String(x.playbook || ''), input: String(x.input || ''), args: { ...(x.args || {}) } }));
  return String(v || '').split(',').map((x) => x.trim()).filter(Boolean).map((playbook) => ({ playbook, input: '', args: {} }));
}

/** Whether two step lists say the same. @param {StepValue[]} a @param {StepValue[]} b */
function sameSteps(a, b) {
  const norm = (/** @type {StepValue[]} */ l) => JSON.stringify(l.map((s) => [s.playbook, s.input, Object.entries(s.args).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))]));
  return norm(a) === norm(b);
}

/** A step's arguments in words, for the difference view. @param {StepValue} st */
function stepText(st) {
  const args = Object.entries(st.args).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${k}=${v}`).join(', ');
  return [st.playbook, st.input ? `input “${st.input}”` : '', args].filter(Boolean).join(' · ');
}

/**
 * The step a validation error is about, 0-based: the error's details.step
 * (1-based, as the form counts) or its field (steps[1].args).
 * @param {any} e
 * @returns {number | null}
 */
export function errorStep(e) {
  const d = (e && e.details) || {};
  if (Number.isInteger(d.step) && d.step > 0) return d.step - 1;
  const m = /^steps\[(\d+)\]/.exec(String(d.field || ''));
  return m ? Number(m[1]) : null;
}

/**
 * A save's error in the form's words: steps counted from 1 ("Step 2"),
 * never the API's steps[1].
 * @param {any} e
 */
export function stepErrorText(e) {
  const i = errorStep(e);
  const msg = errorSentence({ code: e && e.code, message: e && e.message });
  if (i === null) return errorText(e);
  const said = /^Step \d+: /.test(msg) ? msg : `Step ${i + 1}: ${msg.charAt(0).toLowerCase()}${msg.slice(1)}`;
  return `${said} (${e.code || 'error'})`;
}

/**
 * The workflow editor: create (w null) or update with the version last read.
 * Every part of a step is edited (its playbook and argument names are the
 * declared ones, picked from lists; input; order), and a save sends only
 * the fields that changed, with the version it read. Another save of the
 * workflow while it is open (seen live, or refused at save) is announced
 * at the form's top with who saved it: reload theirs, keep mine, or see
 * the difference (edits.js); it never overwrites the form.
 * @param {SpaceContext} ctx @param {Workflow | null} w @param {Record<string, any> | null} values
 * @param {Map<string, PlaybookArg[]>} declared the playbooks' declared arguments, by name
 * @param {(w: Workflow) => void} show shows a workflow (after a save, or theirs)
 */
function editor(ctx, w, values, declared, show) {
  const v = values || {};
  /** @type {Workflow | null} the version the form is based on (theirs, after Keep mine) */
  let base = w;
  const status = h('p', { class: 'form-error', role: 'alert' });
  const conflict = h('div', { class: 'conflict-slot' });
  /** @type {StepValue[]} */
  let original = w ? w.steps.map(stepValue) : [];
  const list = h('ol', { class: 'step-editor', 'aria-label': 'Steps' });
  const names = [...declared.keys()].sort();

  /** What an argument's empty value means: the default saved, or a required one missing. @param {PlaybookArg | undefined} a @param {string} value */
  const argNote = (a, value) => {
    if (!a || value !== '') return '';
    if (a.default !== undefined && a.default !== null) return `Empty: the playbook's default “${a.default}” is saved.`;
    return a.required ? 'Required: give a value.' : 'Empty: not set.';
  };
  /**
   * One argument row: its name picked from the playbook's declared
   * arguments, its value, and what an empty value means.
   * @param {() => PlaybookArg[]} args the step's playbook's arguments, now @param {string} name @param {string} value
   */
  const argRow = (args, name, value) => {
    const decl = () => args().find((a) => a.name === sel.value);
    const note = h('p', { class: 'arg-note muted small', 'aria-live': 'polite' });
    const input = h('input', { type: 'text', class: 'arg-value', value, 'aria-label': `Value of ${name || 'the argument'}`, autocomplete: 'off' });
    const sel = h('select', { class: 'arg-name', 'aria-label': 'Argument' });
    const options = () => {
      const have = args();
      const taken = new Set([...row.closest('.arg-list')?.querySelectorAll('.arg-name') || []].filter((x) => x !== sel).map((x) => /** @type {HTMLSelectElement} */ (x).value));
      const cur = sel.value || name;
      replace(sel, have.filter((a) => a.name === cur || !taken.has(a.name)).map((a) => h('option', { value: a.name, text: a.name + (a.required ? ' *' : ''), title: a.required ? `${a.name}: required` : a.name, selected: a.name === cur })),
        cur && !have.some((a) => a.name === cur) ? h('option', { value: cur, text: `${cur} (not declared)`, selected: true }) : null);
    };
    const sync = () => {
      const a = decl();
      const text = argNote(a, input.value);
      note.textContent = text;
      note.hidden = !text;
      row.dataset.empty = input.value === '' ? (a && a.required && (a.default === undefined || a.default === null) ? 'required' : 'default') : '';
      input.setAttribute('aria-label', `Value of ${sel.value}`);
      input.placeholder = a && a.default !== undefined && a.default !== null ? `default: ${a.default}` : a && a.required ? 'required' : 'optional';
    };
    const row = h('li', { class: 'arg-row', 'data-arg': name },
      sel, input,
      h('button', { type: 'button', class: 'icon-button', 'data-action': 'remove-arg', 'aria-label': `Remove argument ${name}`.trim(), text: '×', onclick: () => { const l = row.parentElement; row.remove(); ctx.setFormDirty(true); if (l) { l.querySelectorAll('.arg-name').forEach((x) => x.dispatchEvent(new Event('refresh'))); l.dispatchEvent(new Event('rows')); } } }),
      note);
    sel.addEventListener('refresh', () => { options(); sync(); });
    sel.addEventListener('change', () => { row.dataset.arg = sel.value; sync(); row.parentElement?.querySelectorAll('.arg-name').forEach((x) => x !== sel && x.dispatchEvent(new Event('refresh'))); row.parentElement?.dispatchEvent(new Event('rows')); });
    input.addEventListener('input', sync);
    // The options need the row in its list (the names other rows took).
    queueMicrotask(() => { options(); sync(); });
    return row;
  };
  const renumber = () => {
    [...list.children].forEach((li, i) => {
      const n = /** @type {HTMLElement} */ (li.querySelector('.step-number'));
      if (n) n.textContent = `Step ${i + 1}`;
      /** @type {HTMLElement} */ (li).dataset.step = String(i + 1);
      /** @type {HTMLButtonElement} */ (li.querySelector('[data-action=step-up]')).disabled = i === 0;
      /** @type {HTMLButtonElement} */ (li.querySelector('[data-action=step-down]')).disabled = i === list.children.length - 1;
      /** @type {HTMLButtonElement} */ (li.querySelector('[data-action=remove-step]')).disabled = list.children.length === 1;
    });
  };
  /** One step. @param {StepValue} st */
  const stepItem = (st) => {
    const pbSel = h('select', { class: 'step-playbook', required: true, 'aria-label': 'Playbook' },
      h('option', { value: '', text: 'Choose a playbook', selected: !st.playbook }),
      names.map((n) => h('option', { value: n, text: n, selected: n === st.playbook })),
      st.playbook && !declared.has(st.playbook) ? h('option', { value: st.playbook, text: `${st.playbook} (not found)`, selected: true }) : null);
    const argsOf = () => declared.get(pbSel.value) || [];
    const args = h('ul', { class: 'arg-list' }, Object.entries(st.args).map(([k, val]) => argRow(argsOf, k, val)));
    const addBtn = h('button', { type: 'button', 'data-action': 'add-arg', text: 'Add argument' });
    /** The argument names the step's rows hold. */
    const held = () => new Set([...args.querySelectorAll('.arg-row')].map((r) => /** @type {HTMLElement} */ (r).dataset.arg || ''));
    /** Rows for the declared arguments the step does not set yet; none for another playbook's. */
    const addDeclared = () => {
      const have = held();
      for (const a of argsOf()) if (!have.has(a.name)) args.append(argRow(argsOf, a.name, ''));
      syncAdd();
    };
    const syncAdd = () => {
      const have = held();
      const free = argsOf().filter((a) => !have.has(a.name));
      addBtn.disabled = free.length === 0;
      addBtn.title = free.length === 0 ? (argsOf().length ? 'Every argument the playbook declares has a row.' : 'The playbook declares no arguments.') : '';
    };
    addBtn.addEventListener('click', () => {
      const have = held();
      const free = argsOf().find((a) => !have.has(a.name));
      if (!free) return;
      const r = argRow(argsOf, free.name, '');
      args.append(r);
      args.querySelectorAll('.arg-name').forEach((x) => x.dispatchEvent(new Event('refresh')));
      syncAdd();
      /** @type {HTMLInputElement} */ (r.querySelector('.arg-value')).focus();
      ctx.setFormDirty(true);
    });
    args.addEventListener('rows', syncAdd);
    pbSel.addEventListener('change', () => {
      // Another playbook: its arguments, keeping the values of those it shares.
      const keep = new Map([...args.querySelectorAll('.arg-row')].map((r) => [/** @type {HTMLSelectElement} */ (r.querySelector('.arg-name')).value, /** @type {HTMLInputElement} */ (r.querySelector('.arg-value')).value]));
      replace(args, argsOf().map((a) => argRow(argsOf, a.name, keep.get(a.name) || '')));
      syncAdd();
    });
    const li = h('li', { class: 'step-edit', 'data-step-edit': '' },
      h('div', { class: 'step-head' },
        h('strong', { class: 'step-number' }),
        h('span', { class: 'step-buttons' },
          h('button', { type: 'button', 'data-action': 'step-up', text: 'Move up', onclick: () => { if (li.previousElementSibling) list.insertBefore(li, li.previousElementSibling); renumber(); ctx.setFormDirty(true); } }),
          h('button', { type: 'button', 'data-action': 'step-down', text: 'Move down', onclick: () => { if (li.nextElementSibling) list.insertBefore(li.nextElementSibling, li); renumber(); ctx.setFormDirty(true); } }),
          h('button', { type: 'button', class: 'danger', 'data-action': 'remove-step', text: 'Remove', onclick: () => { li.remove(); renumber(); ctx.setFormDirty(true); } }))),
      h('label', { class: 'field' }, h('span', { class: 'label', text: 'Playbook *' }), pbSel),
      h('label', { class: 'field' }, h('span', { class: 'label', text: 'Input' }), h('input', { type: 'text', class: 'step-input', value: st.input, autocomplete: 'off', maxlength: '20000' })),
      h('div', { class: 'field' }, h('span', { class: 'label', text: 'Arguments' }), args, addBtn));
    // A new step, or a prefill, lists the playbook's arguments at once.
    if (Object.keys(st.args).length === 0) addDeclared();
    else syncAdd();
    return li;
  };
  /** The steps as the form now says. @returns {StepValue[]} */
  const current = () => [...list.querySelectorAll('[data-step-edit]')].map((li) => {
    /** @type {Record<string, string>} */
    const args = {};
    for (const row of li.querySelectorAll('.arg-row')) {
      const name = /** @type {HTMLSelectElement} */ (row.querySelector('.arg-name')).value;
      const value = /** @type {HTMLInputElement} */ (row.querySelector('.arg-value')).value;
      // A declared argument left empty sets nothing: the playbook's
      // default applies (the row says so).
      if (name && value !== '') args[name] = value;
    }
    return {
      playbook: /** @type {HTMLSelectElement} */ (li.querySelector('.step-playbook')).value,
      input: /** @type {HTMLInputElement} */ (li.querySelector('.step-input')).value,
      args,
    };
  });
  const initial = w ? original : prefillSteps(v.steps);
  for (const st of (initial.length ? initial : [{ playbook: '', input: '', args: {} }])) list.append(stepItem(st));
  renumber();

  /** Marks the step an error is about, and moves focus to it. @param {any} e */
  const markStep = (e) => {
    list.querySelectorAll('[data-step-edit]').forEach((li) => { li.classList.remove('has-error'); li.removeAttribute('aria-invalid'); });
    const i = errorStep(e);
    const li = i === null ? null : /** @type {HTMLElement | null} */ (list.children[i] || null);
    if (!li) return;
    li.classList.add('has-error');
    li.setAttribute('aria-invalid', 'true');
    li.scrollIntoView({ block: 'nearest' });
    const missing = /** @type {HTMLElement | null} */ (li.querySelector('.arg-row[data-empty=required] .arg-value') || li.querySelector('.arg-value, .step-playbook'));
    if (missing) missing.focus({ preventScroll: true });
  };

  const form = h('form', {
    class: 'card form', 'aria-labelledby': 'wf-title', 'data-form': 'workflow',
    onsubmit: async (/** @type {Event} */ ev) => {
      ev.preventDefault();
      status.textContent = '';
      replace(conflict);
      list.querySelectorAll('.has-error').forEach((x) => x.classList.remove('has-error'));
      const steps = current();
      if (steps.length === 0) { status.textContent = 'A workflow needs at least one step.'; return; }
      const unnamed = steps.findIndex((st) => !st.playbook);
      if (unnamed >= 0) {
        status.textContent = `Step ${unnamed + 1}: choose its playbook.`;
        markStep({ details: { step: unnamed + 1 } });
        return;
      }
      try {
        if (!base) {
          const created = await ctx.app.createWorkflow({ name: val(form, 'name'), description: val(form, 'description'), steps });
          ctx.setFormDirty(false);
          ctx.cockpit.flash(`Created workflow ${val(form, 'name')}.`);
          ctx.setParams({ workflow: (created && (created.id || (created.workflow && created.workflow.id))) || val(form, 'name') });
          return;
        }
        /** @type {{expectedVersion: number, name?: string, description?: string, steps?: StepValue[]}} */
        const patch = { expectedVersion: base.version };
        if (val(form, 'name') !== base.name) patch.name = val(form, 'name');
        if (val(form, 'description') !== base.description) patch.description = val(form, 'description');
        if (!sameSteps(steps, original)) patch.steps = steps;
        if (Object.keys(patch).length === 1) { status.textContent = 'Nothing to save: the workflow is as you opened it.'; return; }
        const saved = await ctx.app.updateWorkflow(base.id, patch);
        ctx.setFormDirty(false);
        ctx.cockpit.flash(`Saved workflow ${val(form, 'name')}.`);
        show(saved);
      } catch (e) {
        if (base && versionConflict(e)) {
          follow.conflict().catch((x) => { status.textContent = errorText(x); });
        } else {
          status.textContent = stepErrorText(e);
          markStep(e);
        }
      }
    },
  },
  h('h2', { id: 'wf-title', text: w ? `Edit ${w.name}` : 'New workflow' }),
  w ? versionLine(w) : null,
  // Another save of this workflow is announced here, at the top, where it is seen.
  conflict,
  values ? h('p', { class: 'notice notice-info', text: 'Filled in by the operator. Review before saving; nothing is created until you do.' }) : null,
  field({ label: 'Name', name: 'name', value: w ? w.name : v.name, required: true, maxLength: 64, pattern: '[a-z0-9][a-z0-9._\\-]*' }),
  field({ label: 'Description', name: 'description', value: w ? w.description : v.description, textarea: true, rows: 2, maxLength: 2000 }),
  h('fieldset', { class: 'steps-fieldset' }, h('legend', { text: 'Steps, in the order they run' }), list,
    h('button', { type: 'button', 'data-action': 'add-step', text: 'Add step', onclick: () => { const li = stepItem({ playbook: '', input: '', args: {} }); list.append(li); renumber(); /** @type {HTMLSelectElement} */ (li.querySelector('.step-playbook')).focus(); ctx.setFormDirty(true); } })),
  status,
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary', text: w ? 'Save' : 'Create workflow' }),
    h('button', { type: 'button', text: 'Close', onclick: () => { if (w) ctx.setParams({ workflow: null }); else ctx.cockpit.go(ctx.cockpit.clientRoute()); } })));
  trackDirty(form, ctx);
  const follow = followEdits({
    ctx, kind: 'workflow', name: w ? w.name : '', slot: conflict,
    version: () => (base ? base.version : 0),
    load: () => ctx.app.getWorkflow(w ? w.id : ''),
    dirty: ctx.formDirty,
    reload: (latest) => show(latest),
    keepMine: (latest) => {
      base = latest;
      original = latest.steps.map(stepValue);
      keptMine(form, latest);
      ctx.setFormDirty(true);
    },
    diff: (latest) => {
      const mine = current();
      const theirs = latest.steps.map(stepValue);
      /** @type {import('./edits.js').DiffRow[]} */
      const rows = [{ label: 'Name', theirs: latest.name, mine: val(form, 'name') }, { label: 'Description', theirs: latest.description, mine: val(form, 'description') }];
      for (let i = 0; i < Math.max(mine.length, theirs.length); i++) {
        rows.push({ label: `Step ${i + 1}`, theirs: theirs[i] ? stepText(theirs[i]) : '', mine: mine[i] ? stepText(mine[i]) : '' });
      }
      return rows;
    },
  });
  return { form, follow };
}

/**
 * Launch and delete a workflow: the same commands (and audit rows) the
 * operator proposes.
 * @param {SpaceContext} ctx @param {Workflow} w
 */
function actions(ctx, w) {
  const status = h('p', { class: 'form-error', role: 'alert' });
  return h('div', { class: 'card workflow-actions', 'aria-label': `Actions on ${w.name}` },
    h('h2', null, h('span', { class: 'name', text: w.name }), h('span', { class: 'muted small', text: ` · ${w.steps.length} step${w.steps.length === 1 ? '' : 's'}, v${w.version}` })),
    h('div', { class: 'actions' },
      h('button', {
        type: 'button', class: 'primary', 'data-action': 'launch-workflow', text: 'Launch workflow',
        onclick: async () => {
          status.textContent = '';
          try {
            const res = await ctx.app.launchWorkflow(w.id, w.version);
            ctx.cockpit.flash(`Launched ${w.name}: ${res.runs.length} run${res.runs.length === 1 ? '' : 's'} queued in step order.`);
          } catch (e) { showError(status, e); }
        },
      }),
      h('button', {
        type: 'button', class: 'danger', 'data-action': 'delete-workflow', text: 'Delete workflow',
        onclick: async () => {
          status.textContent = '';
          if (!(await confirmDialog({ title: `Delete workflow ${w.name}?`, body: 'The workflow and its steps are removed for good; the runs it launched stay in the fleet.', confirm: 'Delete workflow', danger: true }))) return;
          try {
            await ctx.app.deleteWorkflow(w.id, w.version);
            ctx.setFormDirty(false);
            ctx.cockpit.flash(`Deleted workflow ${w.name}.`);
            ctx.setParams({ workflow: null });
          } catch (e) { showError(status, e); }
        },
      })),
    status);
}

/**
 * The workflow's recent runs, step by step: each step with the runs it
 * launched, newest first; refresh reads them again in place.
 * @param {SpaceContext} ctx @param {Workflow} w
 */
function stepRuns(ctx, w) {
  const el = h('section', { class: 'card step-runs', 'aria-labelledby': 'step-runs-title' }, h('h2', { id: 'step-runs-title', text: 'Runs by step' }), loading());
  const refresh = () => ctx.app.listRuns({ workflow: w.id, limit: 100 }).then((page) => {
    if (!ctx.isCurrent() || !el.isConnected) return;
    /** @type {Map<number, import('../appapi.js').Run[]>} */
    const byStep = new Map();
    for (const r of page.runs) {
      const k = r.workflowStep ?? -1;
      byStep.set(k, [...(byStep.get(k) || []), r]);
    }
    keepPlace(el, () => replace(el, h('h2', { id: 'step-runs-title', text: 'Runs by step' }),
      page.runs.length === 0 ? h('p', { class: 'muted', text: 'Not launched yet. Launch workflow queues one run per step, in order.' })
        : h('ol', { class: 'steps step-runs-list' }, w.steps.map((st, i) => h('li', { 'data-step': String(i) },
          h('strong', { class: 'name', text: st.playbookName }),
          (byStep.get(i) || []).length === 0 ? h('span', { class: 'muted small', text: ' no runs' })
            : h('ul', { class: 'list' }, (byStep.get(i) || []).slice(0, 5).map((r) => h('li', null, badge(r.status), ' ',
              linkTo(ctx, `/?view=fleet&run=${encodeURIComponent(r.id)}`, shortId(r.id)), ' ', runCells(r).when))))))));
  }).catch((e) => ctx.isCurrent() && replace(el, errorBox(e)));
  refresh();
  return { el, refresh };
}
