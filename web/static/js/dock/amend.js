// Amending a proposal: the operator edits the arguments of a
// pending proposal's command in a form generated from the command's JSON
// Schema (the tool catalog's inputSchema) and confirms the amended command.
// The server validates it like a model's, makes it a new proposal (its own
// hash, idempotency key and audit trail) that replaces the original, and
// this form then confirms that new proposal with its new hash: the human
// confirms exactly the command shown in the preview. An amendment is its
// amender's own command: where four-eyes holds it for another approver,
// the form says so and sends it for approval instead of confirming it.

import { h, uid } from '../dom.js';
import { errorText } from '../api.js';
import { showDialog } from '../dialogs.js';

/**
 * @typedef {import('../frames.js').CommandProposal} CommandProposal
 * @typedef {import('../operator-api.js').OperatorClient} OperatorClient
 * @typedef {import('./proposal.js').ProposalCard} ProposalCard
 * @typedef {{type?: string | string[], description?: string, enum?: any[], maxLength?: number, minimum?: number, properties?: Record<string, Schema>, required?: string[], additionalProperties?: any, items?: Schema}} Schema
 */

/** One form field for a schema property, and how to read its value back. */
class Field {
  /** @param {string} name @param {Schema} schema @param {boolean} required @param {any} value */
  constructor(name, schema, required, value) {
    this.name = name;
    this.schema = schema;
    this.required = required;
    const id = uid('amend');
    const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
    this.kind = schema.enum ? 'enum' : type === 'boolean' ? 'boolean' : type === 'integer' || type === 'number' ? 'number' : type === 'string' ? 'string' : 'json';
    /** @type {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} */
    let input;
    switch (this.kind) {
      case 'enum':
      case 'boolean': {
        const opts = this.kind === 'enum' ? /** @type {any[]} */ (schema.enum) : [true, false];
        input = h('select', { id },
          required ? null : h('option', { value: '', text: '(not set)' }),
          opts.map((v) => h('option', { value: JSON.stringify(v), selected: value === v, text: String(v) })));
        break;
      }
      case 'number':
        input = h('input', { id, type: 'number', step: type === 'integer' ? '1' : 'any', value: value === undefined ? '' : String(value), required });
        break;
      case 'string':
        input = (schema.maxLength || 0) > 200
          ? h('textarea', { id, rows: '3', value: value === undefined ? '' : String(value), required })
          : h('input', { id, value: value === undefined ? '' : String(value), required });
        break;
      default:
        input = h('textarea', { id, rows: '3', class: 'mono', value: value === undefined ? '' : JSON.stringify(value, null, 2), required });
    }
    input.dataset.field = name;
    this.input = input;
    this.el = h('div', { class: 'field' },
      h('label', { for: id, text: `${name}${required ? '' : ' (optional)'}${this.kind === 'json' ? ' (JSON)' : ''}` }),
      input,
      schema.description ? h('p', { class: 'muted small', text: schema.description }) : null);
  }

  /** The field's value; undefined omits it. Throws a readable Error when it cannot be read. */
  read() {
    const raw = this.input.value;
    if (raw === '') {
      if (this.required && this.kind !== 'string') throw new Error(`${this.name} is required`);
      return this.kind === 'string' && this.required ? '' : undefined;
    }
    switch (this.kind) {
      case 'enum':
      case 'boolean':
        return JSON.parse(raw);
      case 'number': {
        const n = Number(raw);
        if (!Number.isFinite(n)) throw new Error(`${this.name} must be a number`);
        return n;
      }
      case 'string':
        return raw;
    }
    try {
      return JSON.parse(raw);
    } catch {
      throw new Error(`${this.name} is not valid JSON`);
    }
  }
}

/**
 * The fields of a command's schema, prefilled with the proposal's command.
 * Properties the schema does not know are kept as they are.
 * @param {Schema} schema @param {Record<string, any>} command
 */
export function fieldsFor(schema, command) {
  const req = new Set(schema.required || []);
  return Object.entries(schema.properties || {}).map(([name, s]) => new Field(name, s, req.has(name), command[name]));
}

/**
 * Reads the amended command from the fields.
 * @param {Field[]} fields @returns {Record<string, any>}
 */
export function commandOf(fields) {
  /** @type {Record<string, any>} */
  const out = {};
  for (const f of fields) {
    const v = f.read();
    if (v !== undefined) out[f.name] = v;
  }
  return out;
}

/**
 * Opens the amend form for a card and, on confirmation, amends and confirms.
 * @param {{client: OperatorClient, conversationId: string, schemaOf: (commandType: string) => Promise<Schema | null>}} o
 * @param {ProposalCard} card
 */
export async function openAmend(o, card) {
  const p = card.p;
  const schema = await o.schemaOf(p.commandType);
  if (!schema) {
    card.fail(new Error(`no schema is known for ${p.commandType}; it cannot be edited here`));
    return;
  }
  const fields = fieldsFor(schema, p.command);
  const titleId = uid('amend-title');
  const preview = h('pre', { class: 'output', 'data-amend-preview': '', tabindex: '0' });
  const error = h('p', { class: 'error-box', role: 'alert', hidden: true });
  const waits = card.amendWaits;
  const submit = h('button', { type: 'submit', class: ['primary', p.risk !== 'mutate' ? 'danger' : ''], 'data-action': 'confirm-amended', text: waits ? 'Send amended command for approval' : 'Confirm amended command' });
  const update = () => {
    try {
      preview.textContent = JSON.stringify(commandOf(fields), null, 2);
      submit.disabled = false;
    } catch (e) {
      preview.textContent = e instanceof Error ? e.message : String(e);
      submit.disabled = true;
    }
  };
  const form = h('form', { method: 'dialog', oninput: update },
    h('h2', { id: titleId, text: `Edit ${p.commandType}` }),
    h('p', { class: 'muted', 'data-amend-note': waits ? 'needs-another-approver' : '', text: waits
      ? 'The server checks the edited command like the model’s and replaces the proposal with it. The edit is your own request: this kind of change needs another approver, so it runs only once someone other than you confirms it. The original proposal will not run.'
      : 'The server checks the edited command like the model’s, replaces the proposal with it, and runs it once you confirm here. The original proposal will not run.' }),
    fields.map((f) => f.el),
    h('p', { class: 'small muted', text: waits ? 'The command you send for approval' : 'The command you confirm' }), preview,
    error,
    h('div', { class: 'actions' }, h('button', { type: 'button', text: 'Cancel', onclick: () => dlg.close('cancel') }), submit));
  const dlg = h('dialog', { class: 'dialog amend-dialog', 'aria-labelledby': titleId }, form);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    error.hidden = true;
    try {
      const amended = await o.client.amendProposal(o.conversationId, p, commandOf(fields));
      dlg.close('ok');
      // The new proposal's hash is the one the operator confirms; one
      // that waits for another approver is theirs to confirm.
      if (!waits) await o.client.confirmProposal(o.conversationId, amended);
    } catch (e) {
      if (dlg.open) {
        error.textContent = `Not amended: ${errorText(e)}`;
        error.hidden = false;
        submit.disabled = false;
      }
      // Amended but not confirmed (the network, a conflict): the new
      // proposal's own card, rendered from its frames, shows it and can
      // still be confirmed or denied.
    }
  });
  update();
  await showDialog(dlg, fields.length ? fields[0].input : submit);
}
