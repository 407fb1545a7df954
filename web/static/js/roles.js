// What the signed-in principal may do, from its role (GET /api/auth/whoami):
// the cockpit hides or disables a control with the reason instead of
// letting the daemon refuse it. The rules mirror the daemon's built-in
// policies (docs/teams.md): viewer < agent < operator < approver <
// admin; a confirm needs operator for mutate and execute and approver for
// admin; four-eyes keeps the author of a proposal of a listed level, or a
// level above it, from confirming it, and an approver never confirms its
// own proposal of risk admin. The daemon's policy still decides (a team's
// policies too): these only spare a person a refusal.

/**
 * @typedef {'viewer'|'agent'|'operator'|'approver'|'admin'} Role
 * @typedef {{id: string, name: string, role: string, secondApproverFor?: string[]}} Me
 * @typedef {{risk: string, impact?: string, submittedBy?: string}} ProposalLike
 * @typedef {{allowed: true} | {allowed: false, reason: string, waiting?: boolean}} Verdict
 */

/** Roles, least to most. @type {Role[]} */
export const ROLES = ['viewer', 'agent', 'operator', 'approver', 'admin'];

/** What each role is for, in a sentence (the admin page's role picker). @type {Record<Role, string>} */
export const ROLE_HELP = {
  viewer: 'reads the cockpit, conversations and the audit',
  agent: 'a program: converses and proposes, never confirms',
  operator: 'converses, runs the cockpit and confirms changes and runs',
  approver: 'also confirms administrative proposals',
  admin: 'everything, including principals, tokens and maintenance',
};

/** The least role of each thing the cockpit lets a person do. @type {Record<string, Role>} */
export const ACTION_ROLES = {
  read: 'viewer',
  converse: 'agent', // create a conversation, send a turn, fork
  cancelTurn: 'agent',
  decide: 'operator', // deny or amend a proposal
  acknowledgeEffect: 'operator',
  change: 'operator', // the application's commands: launch, cancel, retry, create, edit, delete
  deleteConversation: 'operator',
  maintenance: 'admin',
  administer: 'admin', // principals, tokens, webhooks
};

/** @param {string | undefined | null} role */
export function rank(role) {
  return ROLES.indexOf(/** @type {Role} */ (role));
}

/** Whether a role is at least need. @param {string | undefined | null} role @param {Role} need */
export function roleAllows(role, need) {
  const r = rank(role);
  return r >= 0 && r >= rank(need);
}

/** The least role that confirms a proposal of the risk. @param {string} risk @returns {Role} */
export function confirmRole(risk) {
  return risk === 'mutate' || risk === 'execute' ? 'operator' : 'approver';
}

/** "needs the operator role" @param {Role} need */
export function needsText(need) {
  return `needs the ${need} role`;
}

/**
 * Whether me may do an action of ACTION_ROLES, with the reason when not.
 * @param {Me | null} me @param {keyof typeof ACTION_ROLES} action @returns {Verdict}
 */
export function may(me, action) {
  const need = ACTION_ROLES[action];
  if (!me || roleAllows(me.role, need)) return { allowed: true };
  return { allowed: false, reason: `${cap(needsText(need))}; you are ${article(me.role)} ${me.role}.` };
}

/** Risks and impacts, least first: a level covers those above it. */
const RISK_LEVELS = ['mutate', 'execute', 'admin'];
const IMPACT_LEVELS = ['destructive', 'irreversible'];

/**
 * A command's risk and impact and every level below them (the policy's
 * resource.atLeast). @param {string} risk @param {string | undefined} impact
 */
export function atLeast(risk, impact) {
  const r = RISK_LEVELS.indexOf(risk);
  const i = impact ? IMPACT_LEVELS.indexOf(impact) : -1;
  return [...RISK_LEVELS.slice(0, r + 1), ...IMPACT_LEVELS.slice(0, i + 1)];
}

/**
 * Whether the proposal waits for a principal other than me: me submitted
 * it, and its risk or impact is at or above a level of the daemon's
 * four-eyes policy, or it is of risk admin and me is no admin.
 * @param {Me | null} me @param {ProposalLike} p
 */
export function needsAnotherApprover(me, p) {
  if (!me || !p.submittedBy || p.submittedBy !== me.name) return false;
  const policy = me.secondApproverFor || [];
  const levels = atLeast(p.risk, p.impact);
  return policy.some((l) => levels.includes(l)) || (p.risk === 'admin' && me.role !== 'admin');
}

/**
 * Whether me's amendment of the proposal would wait for another approver:
 * an amendment is its amender's own command, so four-eyes asks someone
 * other than me to confirm it, whoever proposed the original.
 * @param {Me | null} me @param {ProposalLike} p
 */
export function amendmentWaits(me, p) {
  return !!me && needsAnotherApprover(me, { ...p, submittedBy: me.name });
}

/**
 * Whether me may confirm the proposal, with the reason when not. The role
 * comes first: a viewer is told the role it lacks, not four-eyes.
 * @param {Me | null} me @param {ProposalLike} p @returns {Verdict}
 */
export function mayConfirm(me, p) {
  if (!me) return { allowed: true };
  const need = confirmRole(p.risk);
  if (!roleAllows(me.role, need)) {
    return { allowed: false, reason: `Confirming this ${needsText(need)}; you are ${article(me.role)} ${me.role}.` };
  }
  if (needsAnotherApprover(me, p)) {
    return { allowed: false, waiting: true, reason: 'Waiting for another approver: you proposed this, and this kind of change needs a second person to confirm it. You can still deny it.' };
  }
  return { allowed: true };
}

/**
 * Whether me may deny (or amend) the proposal: the role only; denying
 * one's own proposal is always allowed.
 * @param {Me | null} me @returns {Verdict}
 */
export function mayDeny(me) {
  return may(me, 'decide');
}

/**
 * Why a proposal card's controls are held, in one sentence ('' when none
 * is): the role for confirming and for denying, or four-eyes.
 * @param {Me | null} me @param {ProposalLike} p
 */
export function decisionReason(me, p) {
  const c = mayConfirm(me, p);
  const d = mayDeny(me);
  if (c.allowed && d.allowed) return '';
  if (!me) return '';
  if (c.allowed === false && c.waiting) return c.reason;
  const you = `you are ${article(me.role)} ${me.role}.`;
  const cNeed = confirmRole(p.risk);
  if (!c.allowed && !d.allowed) {
    return cNeed === ACTION_ROLES.decide ? `Confirming or denying this ${needsText(cNeed)}; ${you}`
      : `Confirming this ${needsText(cNeed)} and denying it ${needsText(ACTION_ROLES.decide)}; ${you}`;
  }
  return `Confirming this ${needsText(cNeed)}; ${you}`;
}

/** @param {string} s */
function cap(s) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** @param {string} word */
function article(word) {
  return /^[aeiou]/.test(word) ? 'an' : 'a';
}
