// Designer: workflows (ordered playbook steps) with an editor form; a
// selected workflow can be launched (one run per step, in order) or
// deleted, and shows its recent runs step by step.

import { h, replace, fmtTime, badge } from '../dom.js';
import { confirmDialog } from '../dialogs.js';
import { searchBox, table, field, val, trackDirty, errorText, loading, errorBox, selectHref, linkTo, runCells, shortId } from './common.js';

/** @typedef {import('../app.js').SpaceContext} SpaceContext @typedef {import('../appapi.js').Workflow} Workflow */

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function mount(el, ctx) {
  const prefill = ctx.takePrefill('workflow');
  const p = ctx.route.params;
  const list = h('div', { class: 'list-pane' });
  const side = h('div', { class: 'detail-pane' });
  el.append(h('div', { class: 'filters', role: 'search' }, searchBox(ctx, 'Search workflows'),
    h('button', { type: 'button', class: 'primary', text: 'New workflow', onclick: () => replace(side, editor(ctx, null, null)) })),
    h('div', { class: 'split' }, list, side));
  replace(list, loading());
  ctx.app.listWorkflows({ q: p.q, limit: 200 }).then((page) => {
    if (!ctx.isCurrent()) return;
    replace(list, table({
      caption: 'Workflows', rows: page.workflows, key: (w) => w.id, selected: p.workflow,
      onSelect: (w) => ctx.setParams({ workflow: w.id }), href: (w) => selectHref(ctx, { workflow: w.id }),
      empty: p.q ? 'No workflow matches.' : h('p', { text: 'No workflows yet. A workflow runs playbooks one after another: choose New workflow and list the playbooks in order.' }),
      columns: [
        { label: 'Name', cell: (w) => h('strong', { text: w.name }), link: true, class: 'name' },
        { label: 'Steps', cell: (w) => w.steps.map((s) => s.playbookName).join(' → ') },
        { label: 'Version', cell: (w) => 'v' + w.version, class: 'num' },
      ],
    }));
  }).catch((e) => ctx.isCurrent() && replace(list, errorBox(e)));
  if (prefill) replace(side, editor(ctx, null, prefill.values));
  else if (p.workflow) {
    replace(side, loading());
    ctx.app.getWorkflow(p.workflow).then((w) => ctx.isCurrent() && replace(side, actions(ctx, w), editor(ctx, w, null), stepRuns(ctx, w)))
      .catch((e) => ctx.isCurrent() && replace(side, errorBox(e)));
  } else replace(side, h('div', { class: 'card muted' }, h('p', { text: 'Select a workflow to edit it, or create a new one.' })));
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

/**
 * The workflow editor: create (w null) or update with the version last read.
 * Every part of a step is edited (playbook, input, each argument, order), and
 * a save sends only the fields that changed, with the version it read: a
 * workflow someone else saved first is a conflict the editor shows, with a
 * reload, instead of overwriting their change.
 * @param {SpaceContext} ctx @param {Workflow | null} w @param {Record<string, any> | null} values
 */
function editor(ctx, w, values) {
  const v = values || {};
  const status = h('p', { class: 'form-error', role: 'alert' });
  const conflict = h('div', { class: 'conflict-slot' });
  /** @type {StepValue[]} */
  const original = w ? w.steps.map(stepValue) : [];
  const list = h('ol', { class: 'step-editor', 'aria-label': 'Steps' });
  const playbooks = h('datalist', { id: 'wf-playbooks' });
  /** @type {Map<string, import('../appapi.js').PlaybookArg[]>} */
  const declared = new Map();
  ctx.app.listPlaybooks({ limit: 200 }).then((page) => {
    for (const pb of page.playbooks) declared.set(pb.name, pb.args || []);
    replace(playbooks, page.playbooks.map((pb) => h('option', { value: pb.name })));
  }).catch(() => { /* names are only suggestions; the server checks them on save */ });

  /** One argument row. @param {string} name @param {string} value @param {string} [placeholder] */
  const argRow = (name, value, placeholder) => {
    const row = h('li', { class: 'arg-row' },
      h('input', { type: 'text', class: 'arg-name', value: name, 'aria-label': 'Argument name', placeholder: 'name', autocomplete: 'off', maxlength: '64' }),
      h('input', { type: 'text', class: 'arg-value', value, 'aria-label': `Value of ${name || 'the argument'}`, placeholder: placeholder || 'value', autocomplete: 'off' }),
      h('button', { type: 'button', class: 'icon-button', 'data-action': 'remove-arg', 'aria-label': `Remove argument ${name}`.trim(), text: '×', onclick: () => { row.remove(); ctx.setFormDirty(true); } }));
    return row;
  };
  /** Adds rows for the playbook's declared arguments the step does not set yet. @param {HTMLElement} args @param {string} playbook */
  const addDeclared = (args, playbook) => {
    const have = new Set([...args.querySelectorAll('.arg-name')].map((i) => /** @type {HTMLInputElement} */ (i).value.trim()));
    for (const a of declared.get(playbook) || []) {
      if (!have.has(a.name)) args.append(argRow(a.name, '', a.default !== undefined ? `default: ${a.default}` : a.required ? 'required' : 'optional'));
    }
  };
  const renumber = () => {
    [...list.children].forEach((li, i) => {
      const n = /** @type {HTMLElement} */ (li.querySelector('.step-number'));
      if (n) n.textContent = `Step ${i + 1}`;
      /** @type {HTMLButtonElement} */ (li.querySelector('[data-action=step-up]')).disabled = i === 0;
      /** @type {HTMLButtonElement} */ (li.querySelector('[data-action=step-down]')).disabled = i === list.children.length - 1;
      /** @type {HTMLButtonElement} */ (li.querySelector('[data-action=remove-step]')).disabled = list.children.length === 1;
    });
  };
  /** One step. @param {StepValue} st */
  const stepItem = (st) => {
    const args = h('ul', { class: 'arg-list' }, Object.entries(st.args).map(([k, val]) => argRow(k, val)));
    const pbInput = h('input', { type: 'text', class: 'step-playbook', value: st.playbook, required: true, list: 'wf-playbooks', 'aria-label': 'Playbook', autocomplete: 'off', pattern: '[a-z0-9][a-z0-9._\\-]*', maxlength: '64',
      onchange: () => addDeclared(args, pbInput.value.trim()) });
    const li = h('li', { class: 'step-edit', 'data-step-edit': '' },
      h('div', { class: 'step-head' },
        h('strong', { class: 'step-number' }),
        h('span', { class: 'step-buttons' },
          h('button', { type: 'button', 'data-action': 'step-up', text: 'Move up', onclick: () => { if (li.previousElementSibling) list.insertBefore(li, li.previousElementSibling); renumber(); ctx.setFormDirty(true); } }),
          h('button', { type: 'button', 'data-action': 'step-down', text: 'Move down', onclick: () => { if (li.nextElementSibling) list.insertBefore(li.nextElementSibling, li); renumber(); ctx.setFormDirty(true); } }),
          h('button', { type: 'button', class: 'danger', 'data-action': 'remove-step', text: 'Remove', onclick: () => { li.remove(); renumber(); ctx.setFormDirty(true); } }))),
      h('label', { class: 'field' }, h('span', { class: 'label', text: 'Playbook *' }), pbInput),
      h('label', { class: 'field' }, h('span', { class: 'label', text: 'Input' }), h('input', { type: 'text', class: 'step-input', value: st.input, autocomplete: 'off', maxlength: '20000' })),
      h('div', { class: 'field' }, h('span', { class: 'label', text: 'Arguments' }), args,
        h('button', { type: 'button', 'data-action': 'add-arg', text: 'Add argument', onclick: () => { const r = argRow('', ''); args.append(r); /** @type {HTMLInputElement} */ (r.querySelector('input')).focus(); } })));
    return li;
  };
  /** The steps as the form now says. @returns {StepValue[]} */
  const current = () => [...list.querySelectorAll('[data-step-edit]')].map((li) => {
    /** @type {Record<string, string>} */
    const args = {};
    for (const row of li.querySelectorAll('.arg-row')) {
      const name = /** @type {HTMLInputElement} */ (row.querySelector('.arg-name')).value.trim();
      const value = /** @type {HTMLInputElement} */ (row.querySelector('.arg-value')).value;
      // An empty row, or a declared argument left empty, sets nothing: the
      // playbook's default applies.
      if (name && value !== '') args[name] = value;
    }
    return {
      playbook: /** @type {HTMLInputElement} */ (li.querySelector('.step-playbook')).value.trim(),
      input: /** @type {HTMLInputElement} */ (li.querySelector('.step-input')).value,
      args,
    };
  });
  const initial = w ? original : prefillSteps(v.steps);
  for (const st of (initial.length ? initial : [{ playbook: '', input: '', args: {} }])) list.append(stepItem(st));
  renumber();

  /** Shows that someone else saved first, and offers to load their version. @param {any} e */
  const showConflict = (e) => {
    const now = e.details && e.details.actualVersion;
    replace(conflict, h('div', { class: 'notice notice-warn', role: 'alert', 'data-conflict': '' },
      h('span', { text: `Someone else saved ${w ? w.name : 'this workflow'}${now ? ` (now v${now})` : ''} after you opened it (v${w ? w.version : '?'}). Your changes are not saved: reload to see theirs, then make your change again.` }),
      h('button', { type: 'button', class: 'primary', 'data-action': 'reload-workflow', text: 'Reload', onclick: () => { ctx.setFormDirty(false); ctx.cockpit.mount(); } })));
  };

  const form = h('form', {
    class: 'card form', 'aria-labelledby': 'wf-title', 'data-form': 'workflow',
    onsubmit: async (/** @type {Event} */ ev) => {
      ev.preventDefault();
      status.textContent = '';
      replace(conflict);
      const steps = current();
      if (steps.length === 0) { status.textContent = 'A workflow needs at least one step.'; return; }
      try {
        if (!w) {
          const created = await ctx.app.createWorkflow({ name: val(form, 'name'), description: val(form, 'description'), steps });
          ctx.setFormDirty(false);
          ctx.cockpit.flash(`Created workflow ${val(form, 'name')}.`);
          ctx.setParams({ workflow: (created && (created.id || (created.workflow && created.workflow.id))) || val(form, 'name') });
          return;
        }
        /** @type {{expectedVersion: number, name?: string, description?: string, steps?: StepValue[]}} */
        const patch = { expectedVersion: w.version };
        if (val(form, 'name') !== w.name) patch.name = val(form, 'name');
        if (val(form, 'description') !== w.description) patch.description = val(form, 'description');
        if (!sameSteps(steps, original)) patch.steps = steps;
        if (Object.keys(patch).length === 1) { status.textContent = 'Nothing to save: the workflow is as you opened it.'; return; }
        await ctx.app.updateWorkflow(w.id, patch);
        ctx.setFormDirty(false);
        ctx.cockpit.flash(`Saved workflow ${val(form, 'name')}.`);
        ctx.cockpit.mount();
      } catch (e) {
        if (w && /** @type {any} */ (e).code === 'conflict' && /** @type {any} */ (e).details && /** @type {any} */ (e).details.expectedVersion !== undefined) showConflict(e);
        else status.textContent = errorText(e);
      }
    },
  },
  h('h2', { id: 'wf-title', text: w ? `Edit ${w.name}` : 'New workflow' }),
  w ? h('p', { class: 'muted small', text: `v${w.version} · updated ${fmtTime(w.updatedAt)}` }) : null,
  values ? h('p', { class: 'notice notice-info', text: 'Filled in by the operator. Review before saving; nothing is created until you do.' }) : null,
  field({ label: 'Name', name: 'name', value: w ? w.name : v.name, required: true, maxLength: 64, pattern: '[a-z0-9][a-z0-9._\\-]*' }),
  field({ label: 'Description', name: 'description', value: w ? w.description : v.description, textarea: true, rows: 2, maxLength: 2000 }),
  h('fieldset', { class: 'steps-fieldset' }, h('legend', { text: 'Steps, in the order they run' }), list, playbooks,
    h('button', { type: 'button', 'data-action': 'add-step', text: 'Add step', onclick: () => { const li = stepItem({ playbook: '', input: '', args: {} }); list.append(li); renumber(); /** @type {HTMLInputElement} */ (li.querySelector('.step-playbook')).focus(); ctx.setFormDirty(true); } })),
  conflict,
  status,
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary', text: w ? 'Save' : 'Create workflow' }),
    h('button', { type: 'button', text: 'Close', onclick: () => { ctx.setFormDirty(false); ctx.setParams({ workflow: null }); if (!w) ctx.cockpit.mount(); } })));
  trackDirty(form, ctx);
  return form;
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
            ctx.cockpit.mount();
          } catch (e) { status.textContent = errorText(e); }
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
          } catch (e) { status.textContent = errorText(e); }
        },
      })),
    status);
}

/**
 * The workflow's recent runs, step by step: each step with the runs it
 * launched, newest first.
 * @param {SpaceContext} ctx @param {Workflow} w
 */
function stepRuns(ctx, w) {
  const el = h('section', { class: 'card step-runs', 'aria-labelledby': 'step-runs-title' }, h('h2', { id: 'step-runs-title', text: 'Runs by step' }), loading());
  ctx.app.listRuns({ workflow: w.id, limit: 100 }).then((page) => {
    if (!ctx.isCurrent()) return;
    /** @type {Map<number, import('../appapi.js').Run[]>} */
    const byStep = new Map();
    for (const r of page.runs) {
      const k = r.workflowStep ?? -1;
      byStep.set(k, [...(byStep.get(k) || []), r]);
    }
    replace(el, h('h2', { id: 'step-runs-title', text: 'Runs by step' }),
      page.runs.length === 0 ? h('p', { class: 'muted', text: 'Not launched yet. Launch workflow queues one run per step, in order.' })
        : h('ol', { class: 'steps step-runs-list' }, w.steps.map((st, i) => h('li', { 'data-step': String(i) },
          h('strong', { class: 'name', text: st.playbookName }),
          (byStep.get(i) || []).length === 0 ? h('span', { class: 'muted small', text: ' no runs' })
            : h('ul', { class: 'list' }, (byStep.get(i) || []).slice(0, 5).map((r) => h('li', null, badge(r.status), ' ',
              linkTo(ctx, `/?view=fleet&run=${encodeURIComponent(r.id)}`, shortId(r.id)), ' ', runCells(r).when)))))));
  }).catch((e) => ctx.isCurrent() && replace(el, errorBox(e)));
  return el;
}
