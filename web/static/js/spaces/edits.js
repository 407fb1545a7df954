// An edit form of a resource others may save too (a workflow, a playbook,
// a schedule): when another save lands while the form is open — seen on
// the change stream, or refused as a conflict at save — the form is never
// overwritten. It says who saved and offers: reload theirs, keep mine
// (the next save replaces theirs, knowingly), or see the difference.

import { h, replace } from '../dom.js';
import { fmtRelative, fmtTime } from '../time.js';
import { actorName } from '../words.js';
import { errorText } from '../api.js';

/**
 * @typedef {import('../app.js').SpaceContext} SpaceContext
 * @typedef {import('../appapi.js').AppApi} AppApi
 * @typedef {{label: string, theirs: string, mine: string}} DiffRow
 * @typedef {{actor: string, at: number}} Saver
 */

/** The commands that change a resource, as the audit trail names them. */
const CHANGES = /^(create|update|delete)_|^set_schedule_enabled$/;

/**
 * Who last changed a resource, from the audit trail: the newest row of a
 * command that changed it (applied directly, or an operator's proposal
 * that executed), or null when the trail does not say.
 * @param {AppApi} app @param {string} id
 * @returns {Promise<Saver | null>}
 */
export async function savedBy(app, id) {
  const page = await app.audit({ target: id, limit: 20 });
  for (const e of page.events) {
    const d = e.details || {};
    const type = String(d.command_type || d.commandType || '');
    if (!CHANGES.test(type)) continue;
    if (e.action === 'studio.operator.command' && d.decision !== 'executed') continue;
    return { actor: e.actor, at: e.createdAt };
  }
  return null;
}

/**
 * Whether a save was refused because another save came first (its
 * expectedVersion no longer the resource's).
 * @param {unknown} e
 */
export function versionConflict(e) {
  const x = /** @type {any} */ (e);
  return !!x && x.code === 'conflict' && !!x.details && x.details.expectedVersion !== undefined;
}

/**
 * An edit form's "v3 · updated …" line; keptMine rewrites it.
 * @param {{version: number, updatedAt: number}} r
 */
export function versionLine(r) {
  return h('p', { class: 'muted small', 'data-version': '', text: `v${r.version} · updated ${fmtTime(r.updatedAt)}` });
}

/**
 * Says on a form that it is now based on theirs and that saving replaces it.
 * @param {HTMLElement} form @param {{version: number, updatedAt: number}} latest
 */
export function keptMine(form, latest) {
  const ver = form.querySelector('[data-version]');
  if (ver) ver.textContent = `v${latest.version} · updated ${fmtTime(latest.updatedAt)} · saving replaces it with your edits`;
}

/**
 * The rows where two versions differ.
 * @param {DiffRow[]} rows
 */
export function changedRows(rows) {
  return rows.filter((r) => r.theirs !== r.mine);
}

/**
 * @template {{version: number}} T
 * @typedef {object} EditFollow
 * @property {SpaceContext} ctx
 * @property {string} kind 'workflow', 'playbook', 'schedule'
 * @property {string} name the resource's name, as the form shows it
 * @property {() => number} version the version the form is based on
 * @property {() => Promise<T>} load reads the resource as it is now
 * @property {() => boolean} dirty whether the form holds unsaved edits
 * @property {HTMLElement} slot where the notice shows: the form's top
 * @property {(latest: T) => void} reload shows theirs (the form is rebuilt)
 * @property {(latest: T) => void} keepMine bases the form on theirs, keeping its values
 * @property {(latest: T) => DiffRow[]} diff theirs against what the form says now
 */

/**
 * Follows an open edit form: check() after a change event of the
 * resource, conflict() after a save refused as a conflict.
 * @template {{version: number}} T
 * @param {EditFollow<T>} o
 */
export function followEdits(o) {
  /** @type {number} */
  let shownFor = 0;
  const notice = async (/** @type {T} */ latest, /** @type {boolean} */ refused) => {
    shownFor = latest.version;
    let who = null;
    try { who = await savedBy(o.ctx.app, /** @type {any} */ (latest).id); } catch { /* who is a refinement */ }
    if (!o.ctx.isCurrent()) return;
    const by = who ? `${actorName(who.actor)} saved` : 'Someone else saved';
    const when = who ? h('time', { datetime: new Date(who.at * 1000).toISOString(), title: fmtTime(who.at), text: ` ${fmtRelative(who.at)}` }) : null;
    const diff = h('div', { class: 'diff', hidden: true });
    const box = h('div', { class: 'notice notice-warn changed-notice', role: 'alert', tabindex: '-1', 'data-changed': '', 'data-saved-by': who ? who.actor : '' },
      h('p', null,
        h('strong', { 'data-changed-by': '', text: `${by} ${o.kind} ${o.name}` }), when,
        ` (now v${latest.version}; you opened v${o.version()}). `,
        refused ? 'Your save was refused, so nothing of yours is saved yet: ' : 'Your edits here are not saved yet: ',
        'reload theirs, keep yours (your next save replaces theirs), or see the difference first.'),
      h('div', { class: 'actions' },
        h('button', { type: 'button', 'data-action': 'reload-theirs', 'data-needs': 'read', text: 'Reload theirs', onclick: () => { o.ctx.setFormDirty(false); o.reload(latest); } }),
        h('button', { type: 'button', 'data-action': 'keep-mine', 'data-needs': 'read', text: 'Keep mine', onclick: () => { o.keepMine(latest); replace(o.slot); } }),
        h('button', {
          type: 'button', 'data-action': 'see-difference', 'data-needs': 'read', 'aria-expanded': 'false', text: 'See the difference',
          onclick: (/** @type {Event} */ ev) => {
            const btn = /** @type {HTMLButtonElement} */ (ev.currentTarget);
            const open = diff.hidden;
            if (open) replace(diff, diffTable(o.diff(latest), latest.version));
            diff.hidden = !open;
            btn.setAttribute('aria-expanded', String(open));
          },
        })),
      diff);
    replace(o.slot, box);
    // Where the eye is: the notice is at the form's top, scrolled to.
    box.scrollIntoView({ block: 'nearest' });
    if (refused || !o.slot.contains(document.activeElement)) box.focus({ preventScroll: true });
  };
  return {
    /** After a change event: another version is shown as it is, or, over unsaved edits, announced. */
    async check() {
      let latest;
      try {
        latest = await o.load();
      } catch (e) {
        if (o.ctx.isCurrent()) replace(o.slot, h('div', { class: 'notice notice-warn', role: 'alert', 'data-changed': '' }, h('span', { text: `This ${o.kind} could not be read again: ${errorText(e)}. Your edits here are not saved.` })));
        return;
      }
      if (!o.ctx.isCurrent() || latest.version <= o.version() || latest.version === shownFor) return;
      if (!o.dirty()) o.reload(latest);
      else await notice(latest, false);
    },
    /** After a save refused as a conflict: says who saved first. */
    async conflict() {
      const latest = await o.load();
      if (o.ctx.isCurrent()) await notice(latest, true);
    },
  };
}

/**
 * Theirs beside mine, the rows that differ.
 * @param {DiffRow[]} rows @param {number} version
 */
function diffTable(rows, version) {
  const diff = changedRows(rows);
  if (diff.length === 0) return h('p', { class: 'muted', text: 'Your edits and theirs say the same.' });
  return h('table', { class: 'table compact diff-table', 'data-diff': '' },
    h('caption', { class: 'visually-hidden', text: 'Their version beside yours' }),
    h('thead', null, h('tr', null, h('th', { scope: 'col', text: 'Field' }), h('th', { scope: 'col', text: `Theirs (v${version})` }), h('th', { scope: 'col', text: 'Yours' }))),
    h('tbody', null, diff.map((r) => h('tr', null, h('th', { scope: 'row', text: r.label }), h('td', { class: 'theirs', text: r.theirs || '—' }), h('td', { class: 'mine', text: r.mine || '—' })))));
}
