// Words a person reads instead of the daemon's codes: command types,
// audit actions, risks and actors. Pure functions (unit-tested in node).

/** Risks, as a badge says them. @type {Record<string, string>} */
export const RISK_WORDS = { mutate: 'Changes data', execute: 'Runs work', admin: 'Administrative' };

/** A risk in plain words. @param {string} risk */
export function riskText(risk) {
  return RISK_WORDS[risk] || sentence(risk);
}

/** Audit actions, and the commands whose title is not their type in words (internal/studio's command table). @type {Record<string, string>} */
const ACTIONS = {
  set_schedule_enabled: 'Enable or pause schedule',
  'studio.app.command': 'Command',
  'studio.app.seeded': 'Starter content created',
  'studio.app.retention': 'Old runs cleaned up',
  'studio.schedule.skipped': 'Schedule slots skipped',
  'studio.operator.command': 'Operator proposal',
  'studio.operator.proposal_amended': 'Proposal amended',
  'studio.operator.conversation.restore': 'Conversation restored',
  'studio.principal.created': 'Principal added',
  'studio.principal.role_changed': 'Role changed',
  'studio.principal.disabled': 'Principal disabled',
  'studio.token.created': 'Token created',
  'studio.token.revoked': 'Token revoked',
};

/**
 * A command type or an audit action in words: launch_playbook → "Launch
 * playbook", studio.app.seeded → "Starter content created".
 * @param {string | null | undefined} code
 */
export function commandTitle(code) {
  if (!code) return '';
  if (ACTIONS[code]) return ACTIONS[code];
  // An unknown dotted action: its last part, in words.
  const last = code.startsWith('studio.') ? code.split('.').slice(-1)[0] : code;
  return sentence(last);
}

/** snake_case or kebab-case as a sentence's words. @param {string} s */
export function sentence(s) {
  const words = String(s).replace(/[_-]+/g, ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** The daemon's own actors (and the cockpit's), as people say them. @type {Record<string, string>} */
const ACTORS = {
  studio_cockpit: 'someone in the cockpit',
  studio_cli: 'someone at the command line',
  studio_operator: 'the operator',
  studio_scheduler: 'the scheduler',
  studio_system: 'the system',
};

/**
 * Who acted: a principal by its name, the daemon's own actors in words.
 * @param {string | null | undefined} actor
 */
export function actorName(actor) {
  if (!actor) return 'nobody recorded';
  return ACTORS[actor] || actor;
}

/**
 * A protocol error as a sentence: the message without its code, and a
 * not_found's message (“run deadbeef not found”) as a person says it.
 * @param {{code?: string, message?: string} | null | undefined} e
 */
export function errorSentence(e) {
  if (!e) return '';
  const msg = (e.message || '').trim();
  const nf = /^(\w+) (\S+) not found$/.exec(msg);
  if (e.code === 'not_found' && nf) return `No ${nf[1]} ${nf[2].slice(0, 8)} exists (it may have been deleted).`;
  if (!msg) return sentence(e.code || 'error');
  return msg.charAt(0).toUpperCase() + msg.slice(1) + (/[.!?]$/.test(msg) ? '' : '.');
}
