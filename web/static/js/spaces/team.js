// System → Team (admins only): the principals and their roles, their
// personal tokens (prefix, created, last used, expires; a new token is
// shown once), and the webhooks with their recent deliveries. Each change
// asks first when it cannot be undone and is audited by the daemon.

import { h, replace, uid } from '../dom.js';
import { fmtTime, fmtShort } from '../time.js';
import { ApiError, errorText } from '../api.js';
import { AdminApi, WEBHOOK_EVENTS } from '../adminapi.js';
import { confirmDialog, showDialog } from '../dialogs.js';
import { ROLES, ROLE_HELP } from '../roles.js';
import { errorBox, loading } from './loading.js';
import { scrollFrame } from './table.js';

/**
 * @typedef {import('../app.js').SpaceContext} SpaceContext
 * @typedef {import('../adminapi.js').Webhook} Webhook
 * @typedef {import('../../../types/wire').PrincipalView} PrincipalView
 * @typedef {import('../../../types/wire').TokenView} TokenView
 */

/** Token lifetimes offered when creating one. */
const LIFETIMES = [{ value: '30d', label: '30 days' }, { value: '90d', label: '90 days' }, { value: '365d', label: 'a year' }, { value: '', label: 'never expires' }];

/** @param {number | null | undefined} t */
const when = (t) => (t ? h('time', { datetime: new Date(t * 1000).toISOString(), title: fmtTime(t), text: fmtShort(t) }) : h('span', { class: 'muted', text: 'never' }));

/** @param {HTMLElement} el @param {SpaceContext} ctx */
export function team(el, ctx) {
  const me = ctx.cockpit.me;
  if (me && me.role !== 'admin') {
    el.append(h('p', { class: 'read-only-note', role: 'note', text: `The team page needs the admin role; you are signed in as ${me.name} (${me.role}).` }));
    return;
  }
  const admin = new AdminApi(ctx.app.api);
  const out = h('div', { class: 'team-result', role: 'status', 'aria-live': 'polite' });
  const people = h('section', { class: 'card team-section', 'aria-labelledby': 'team-principals' });
  const tokens = h('section', { class: 'card team-section', 'aria-labelledby': 'team-tokens' });
  const hooks = h('section', { class: 'card team-section', 'aria-labelledby': 'team-webhooks', 'data-webhooks': 'loading' });
  el.append(out, people, tokens, hooks);

  /** Shows a result (or error) above the sections. @param {Node | string} what @param {'info'|'error'} [kind] */
  const say = (what, kind = 'info') => replace(out, typeof what === 'string' ? h('p', { class: kind === 'error' ? 'error-box' : 'notice notice-info', role: kind === 'error' ? 'alert' : undefined, text: what }) : what);

  const reload = async () => {
    replace(people, h('h2', { id: 'team-principals', text: 'Principals' }), loading());
    replace(tokens, h('h2', { id: 'team-tokens', text: 'Tokens' }), loading());
    try {
      const [ps, ts] = await Promise.all([admin.principals(), admin.tokens()]);
      if (!ctx.isCurrent()) return;
      showPrincipals(ps.principals);
      showTokens(ts.tokens);
    } catch (e) {
      if (ctx.isCurrent()) replace(people, h('h2', { id: 'team-principals', text: 'Principals' }), errorBox(e));
    }
  };

  /** @param {PrincipalView[]} list */
  const showPrincipals = (list) => {
    const nameId = uid('pname');
    const roleId = uid('prole');
    const name = /** @type {HTMLInputElement} */ (h('input', { id: nameId, name: 'name', required: true, pattern: '[a-z0-9][a-z0-9._@+\\-]{0,63}', maxlength: '64', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': nameId + '-help' }));
    const role = /** @type {HTMLSelectElement} */ (h('select', { id: roleId, name: 'role' }, ROLES.map((r) => h('option', { value: r, text: `${r}: ${ROLE_HELP[r]}`, selected: r === 'operator' }))));
    const add = h('form', {
      class: 'inline-form', 'aria-label': 'Add a principal',
      onsubmit: async (/** @type {Event} */ ev) => {
        ev.preventDefault();
        try {
          const p = await admin.createPrincipal(name.value.trim(), role.value);
          say(`Added ${p.name} (${p.role}). Create a token for them below to let them sign in.`);
          reload();
        } catch (e) { say(errorText(e), 'error'); }
      },
    },
    h('div', { class: 'field inline' }, h('label', { for: nameId, text: 'Name' }), name),
    h('div', { class: 'field inline' }, h('label', { for: roleId, text: 'Role' }), role),
    h('button', { type: 'submit', class: 'primary', text: 'Add principal' }),
    h('p', { id: nameId + '-help', class: 'muted small', text: 'Lowercase letters, digits and . _ - @ +, e.g. alice, ci-bot or alice@example.com.' }));
    replace(people, h('h2', { id: 'team-principals', text: 'Principals' }),
      scrollFrame(h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-principals': '' },
        h('caption', { class: 'visually-hidden', text: 'Principals' }),
        h('thead', null, h('tr', null, ['Name', 'Role', 'Added', 'State', 'Actions'].map((c) => h('th', { scope: 'col', class: c === 'Added' ? 'hide-narrow' : undefined, text: c })))),
        h('tbody', null, list.map((p) => principalRow(p)))))),
      add);
  };

  /** @param {PrincipalView} p */
  const principalRow = (p) => {
    const disabled = !!p.disabledAt;
    const isMe = !!ctx.cockpit.me && ctx.cockpit.me.id === p.id;
    const selId = uid('role');
    const sel = /** @type {HTMLSelectElement} */ (h('select', {
      id: selId, disabled, 'data-role-of': p.name,
      onchange: async () => {
        const to = sel.value;
        try {
          await admin.setRole(p.id, to);
          say(`${p.name} is now ${to}.`);
        } catch (e) {
          sel.value = p.role;
          say(errorText(e), 'error');
        }
        reload();
      },
    }, ROLES.map((r) => h('option', { value: r, text: r, selected: r === p.role }))));
    return h('tr', { 'data-principal': p.name, class: disabled ? 'muted' : '' },
      h('td', null, h('strong', { class: 'name', text: p.name }), isMe ? h('span', { class: 'muted small', text: ' (you)' }) : null,
        p.origin === 'proxy' ? h('span', { class: 'muted small', 'data-origin': 'proxy', text: ' · from the sign-in proxy' }) : null,
        p.proxyUser ? h('span', { class: 'muted small', 'data-proxy-user': p.proxyUser, text: ` · signs in through the proxy as ${p.proxyUser}` }) : null),
      h('td', null, h('label', { for: selId, class: 'visually-hidden', text: `Role of ${p.name}` }), sel),
      h('td', { class: 'hide-narrow' }, when(p.createdAt)),
      h('td', null, disabled ? ['disabled ', when(p.disabledAt)] : 'active'),
      h('td', null, h('div', { class: 'row-actions' },
        h('button', {
          type: 'button', class: 'small', disabled, 'data-action': 'new-token', 'data-needs': 'administer', text: 'New token…',
          'aria-label': `New token for ${p.name}`,
          onclick: () => newToken(p),
        }),
        h('button', {
          type: 'button', class: 'small danger', disabled: disabled || isMe, 'data-action': 'disable-principal', 'data-needs': 'administer', text: 'Disable',
          'aria-label': `Disable ${p.name}`, title: isMe ? 'You cannot disable yourself; another admin can.' : undefined,
          onclick: async () => {
            if (!(await confirmDialog({ title: `Disable ${p.name}?`, body: `${p.name} can no longer sign in, and every token of theirs is revoked on every daemon at once. Their name stays on the record. This cannot be undone.`, confirm: 'Disable', danger: true }))) return;
            try {
              await admin.disablePrincipal(p.id);
              say(`${p.name} is disabled; their tokens are revoked.`);
            } catch (e) { say(errorText(e), 'error'); }
            reload();
          },
        }))));
  };

  /** Creates a token for p after asking its lifetime; shows it once. @param {PrincipalView} p */
  const newToken = async (p) => {
    const id = uid('life');
    const life = /** @type {HTMLSelectElement} */ (h('select', { id }, LIFETIMES.map((l) => h('option', { value: l.value, text: l.label, selected: l.value === '90d' }))));
    const dlg = /** @type {HTMLDialogElement} */ (h('dialog', { class: 'dialog', 'aria-labelledby': id + '-title' },
      h('form', { method: 'dialog' },
        h('h2', { id: id + '-title', text: `A new token for ${p.name}` }),
        h('p', { text: 'The token is shown once, right after it is made: copy it to the person, who signs in with it.' }),
        h('div', { class: 'field' }, h('label', { for: id, text: 'Expires after' }), life),
        h('div', { class: 'actions' },
          h('button', { type: 'button', text: 'Cancel', onclick: () => dlg.close('cancel') }),
          h('button', { type: 'submit', value: 'ok', class: 'primary', text: 'Create token' })))));
    if ((await showDialog(dlg, life)) !== 'ok') return;
    try {
      const t = await admin.createToken(p.id, life.value || undefined);
      const tokId = uid('tok');
      say(h('div', { class: 'card new-token', 'data-new-token': '' },
        h('h2', { text: `Token for ${p.name}` }),
        h('p', { text: 'Copy it now: it is never shown again (only its prefix is kept).' }),
        h('label', { for: tokId, class: 'visually-hidden', text: 'The new token' }),
        h('input', { id: tokId, class: 'secret', readonly: true, value: t.token, onfocus: (/** @type {FocusEvent} */ ev) => /** @type {HTMLInputElement} */ (ev.target).select() }),
        h('button', { type: 'button', class: 'small', text: 'Copy', onclick: () => navigator.clipboard && navigator.clipboard.writeText(t.token).then(() => say(`Copied the token for ${p.name}.`)).catch(() => {}) }),
        h('p', { class: 'muted small', text: `Prefix ${t.prefix}; ${t.expiresAt ? 'expires ' + fmtTime(t.expiresAt) : 'does not expire'}.` })));
      reload();
    } catch (e) { say(errorText(e), 'error'); }
  };

  /** @param {TokenView[]} list */
  const showTokens = (list) => {
    const now = Date.now() / 1000;
    const state = (/** @type {TokenView} */ t) => (t.revokedAt ? 'revoked' : t.expiresAt && t.expiresAt <= now ? 'expired' : 'active');
    replace(tokens, h('h2', { id: 'team-tokens', text: 'Tokens' }),
      list.length === 0 ? h('p', { class: 'muted', text: 'No tokens yet. Make one with “New token…” beside a principal.' }) :
        scrollFrame(h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-tokens': '' },
          h('caption', { class: 'visually-hidden', text: 'Tokens' }),
          h('thead', null, h('tr', null, ['Principal', 'Prefix', 'Created', 'Last used', 'Expires', 'State', ''].map((c, i) => h('th', { scope: 'col', text: c || undefined }, i === 6 ? h('span', { class: 'visually-hidden', text: 'Actions' }) : null)))),
          h('tbody', null, list.map((t) => h('tr', { 'data-token': t.prefix, class: state(t) === 'active' ? '' : 'muted' },
            h('td', { class: 'name', text: t.principal || '—' }),
            h('td', null, h('code', { text: t.prefix + '…' })),
            h('td', null, when(t.createdAt)),
            h('td', null, when(t.lastUsedAt)),
            h('td', null, t.expiresAt ? when(t.expiresAt) : h('span', { class: 'muted', text: 'never' })),
            h('td', { text: state(t) }),
            h('td', null, state(t) === 'active' ? h('button', {
              type: 'button', class: 'small danger', 'data-action': 'revoke-token', 'data-needs': 'administer', text: 'Revoke', 'aria-label': `Revoke token ${t.prefix} of ${t.principal}`,
              onclick: async () => {
                if (!(await confirmDialog({ title: `Revoke ${t.prefix}…?`, body: `Whoever holds this token of ${t.principal} is refused from the next request on, on every daemon.`, confirm: 'Revoke', danger: true }))) return;
                try {
                  await admin.revokeToken(t.id);
                  say(`Revoked ${t.prefix}… of ${t.principal}.`);
                } catch (e) { say(errorText(e), 'error'); }
                reload();
              },
            }) : null))))))));
  };

  const reloadHooks = async () => {
    let list;
    try {
      list = (await admin.webhooks()).webhooks;
    } catch (e) {
      if (!ctx.isCurrent()) return;
      // A daemon without the webhooks API: the section stays out of the way.
      if (e instanceof ApiError && e.status === 404) {
        hooks.hidden = true;
        hooks.dataset.webhooks = 'unavailable';
        return;
      }
      replace(hooks, h('h2', { id: 'team-webhooks', text: 'Webhooks' }), errorBox(e));
      return;
    }
    if (!ctx.isCurrent()) return;
    hooks.dataset.webhooks = 'shown';
    showHooks(list);
  };

  /** @param {Webhook[]} list */
  const showHooks = (list) => {
    const urlId = uid('hook');
    const fmtId = uid('fmt');
    const url = /** @type {HTMLInputElement} */ (h('input', { id: urlId, type: 'url', required: true, placeholder: 'https://hooks.example.com/studio', autocomplete: 'off' }));
    const format = /** @type {HTMLSelectElement} */ (h('select', { id: fmtId }, h('option', { value: 'standard', text: 'Standard Webhooks (signed JSON)' }), h('option', { value: 'slack', text: 'Slack message' })));
    const boxes = WEBHOOK_EVENTS.map((ev) => {
      const id = uid('ev');
      return { ev, input: /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox', id, value: ev.id, checked: ev.id === 'proposal.pending' })), id };
    });
    const add = h('form', {
      class: 'inline-form', 'aria-label': 'Add a webhook',
      onsubmit: async (/** @type {Event} */ ev) => {
        ev.preventDefault();
        const events = boxes.filter((b) => b.input.checked).map((b) => b.ev.id);
        if (!events.length) { say('Pick at least one event.', 'error'); return; }
        try {
          const r = await admin.createWebhook({ url: url.value.trim(), events, format: format.value });
          say(h('div', { class: 'card new-token', 'data-new-secret': '' },
            h('h2', { text: `Webhook to ${r.webhook.url}` }),
            h('p', { text: 'Its signing secret, shown once: give it to the receiver to verify the signatures.' }),
            h('code', { class: 'secret', text: r.secret })));
          reloadHooks();
        } catch (e) { say(errorText(e), 'error'); }
      },
    },
    h('div', { class: 'field inline grow' }, h('label', { for: urlId, text: 'URL' }), url),
    h('fieldset', { class: 'events' }, h('legend', { text: 'Events' }), boxes.map((b) => h('span', { class: 'check' }, b.input, h('label', { for: b.id, text: b.ev.label })))),
    h('div', { class: 'field inline' }, h('label', { for: fmtId, text: 'Format' }), format),
    h('button', { type: 'submit', class: 'primary', text: 'Add webhook' }));
    replace(hooks, h('h2', { id: 'team-webhooks', text: 'Webhooks' }),
      list.length === 0 ? h('p', { class: 'muted', text: 'No webhooks: add one to hear about proposals waiting for a decision and failed runs.' }) :
        h('ul', { class: 'list hooks' }, list.map((w) => hookItem(w))),
      add);
  };

  /** @param {Webhook} w */
  const hookItem = (w) => {
    const deliveries = h('div', { class: 'deliveries' }, loading('Reading recent deliveries…'));
    admin.deliveries(w.id).then((r) => {
      const recent = (r.deliveries || []).slice(0, 10);
      replace(deliveries, recent.length === 0 ? h('p', { class: 'muted small', text: 'No deliveries yet.' }) :
        h('table', { class: 'table compact' },
          h('caption', { class: 'visually-hidden', text: `Recent deliveries to ${w.url}` }),
          h('thead', null, h('tr', null, ['Event', 'State', 'Attempts', 'Answer', 'When'].map((c) => h('th', { scope: 'col', text: c })))),
          h('tbody', null, recent.map((d) => h('tr', { 'data-delivery': d.status },
            h('td', { text: d.event }),
            h('td', null, h('span', { class: ['badge', 'badge-' + (d.status === 'delivered' ? 'succeeded' : d.status === 'failed' ? 'failed' : 'queued')], text: d.status })),
            h('td', { class: 'num', text: String(d.attempts) }),
            h('td', { text: d.lastStatus ? `HTTP ${d.lastStatus}` : d.lastError || '—' }),
            h('td', null, when(d.deliveredAt || d.createdAt)))))));
    }).catch((e) => replace(deliveries, errorBox(e)));
    return h('li', { 'data-webhook': w.id },
      h('p', null, h('strong', { class: 'name', text: w.url }), h('span', { class: 'muted small', text: ` · ${w.format} · ${w.events.join(', ')} · added by ${w.createdBy} ` }), when(w.createdAt)),
      deliveries,
      h('button', {
        type: 'button', class: 'small danger', 'data-action': 'remove-webhook', 'data-needs': 'administer', text: 'Remove', 'aria-label': `Remove the webhook to ${w.url}`,
        onclick: async () => {
          if (!(await confirmDialog({ title: 'Remove this webhook?', body: `${w.url} hears nothing more from Studio.`, confirm: 'Remove', danger: true }))) return;
          try { await admin.deleteWebhook(w.id); say(`Removed the webhook to ${w.url}.`); } catch (e) { say(errorText(e), 'error'); }
          reloadHooks();
        },
      }));
  };

  reload();
  reloadHooks();
}
