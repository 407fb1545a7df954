// Designer: workflows (ordered playbook steps) with an editor form.

import { h, replace, fmtTime } from '../dom.js';
import { searchBox, table, field, val, trackDirty, errorText, loading, errorBox, selectHref } from './common.js';

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
    ctx.app.getWorkflow(p.workflow).then((w) => ctx.isCurrent() && replace(side, editor(ctx, w, null)))
      .catch((e) => ctx.isCurrent() && replace(side, errorBox(e)));
  } else replace(side, h('div', { class: 'card muted' }, h('p', { text: 'Select a workflow to edit it, or create a new one.' })));
}

/**
 * The workflow editor: create (w null) or update with the version last read.
 * @param {SpaceContext} ctx @param {Workflow | null} w @param {Record<string, any> | null} values
 */
function editor(ctx, w, values) {
  const v = values || {};
  const status = h('p', { class: 'form-error', role: 'alert' });
  const steps = w ? w.steps.map((s) => s.playbookName).join(', ') : (v.steps || '');
  const form = h('form', {
    class: 'card form', 'aria-labelledby': 'wf-title', 'data-form': 'workflow',
    onsubmit: async (/** @type {Event} */ ev) => {
      ev.preventDefault();
      status.textContent = '';
      const stepList = val(form, 'steps').split(',').map((s) => s.trim()).filter(Boolean).map((playbook) => ({ playbook }));
      try {
        if (!w) {
          const created = await ctx.app.createWorkflow({ name: val(form, 'name'), description: val(form, 'description'), steps: stepList });
          ctx.setFormDirty(false);
          ctx.cockpit.flash(`Created workflow ${val(form, 'name')}.`);
          ctx.setParams({ workflow: (created && (created.id || (created.workflow && created.workflow.id))) || val(form, 'name') });
        } else {
          await ctx.app.updateWorkflow(w.id, { expectedVersion: w.version, name: val(form, 'name'), description: val(form, 'description'), steps: stepList });
          ctx.setFormDirty(false);
          ctx.cockpit.flash(`Saved workflow ${val(form, 'name')}.`);
          ctx.cockpit.mount();
        }
      } catch (e) { status.textContent = errorText(e); }
    },
  },
  h('h2', { id: 'wf-title', text: w ? `Edit ${w.name}` : 'New workflow' }),
  w ? h('p', { class: 'muted small', text: `v${w.version} · updated ${fmtTime(w.updatedAt)}` }) : null,
  values ? h('p', { class: 'notice notice-info', text: 'Filled in by the operator. Review before saving; nothing is created until you do.' }) : null,
  field({ label: 'Name', name: 'name', value: w ? w.name : v.name, required: true, maxLength: 64, pattern: '[a-z0-9][a-z0-9._\\-]*' }),
  field({ label: 'Description', name: 'description', value: w ? w.description : v.description, textarea: true, rows: 2, maxLength: 2000 }),
  field({ label: 'Steps', name: 'steps', value: steps, required: true, help: 'Playbook names in order, comma separated, e.g. audit-repo, summarize-failed-runs' }),
  w && w.steps.length ? h('ol', { class: 'steps' }, w.steps.map((s) => h('li', null, h('strong', { text: s.playbookName }), s.input ? ` — input “${s.input}”` : ''))) : null,
  status,
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary', text: w ? 'Save' : 'Create workflow' }),
    h('button', { type: 'button', text: 'Close', onclick: () => { ctx.setFormDirty(false); ctx.setParams({ workflow: null }); if (!w) ctx.cockpit.mount(); } })));
  trackDirty(form, ctx);
  return form;
}
