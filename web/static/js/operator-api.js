// The typed operator API (docs/design.md §5): one method per endpoint of
// /api/operator. A failure is returned to the caller, never retried here.

import { query, enc } from './api.js';

/**
 * @typedef {import('./api.js').Api} Api
 * @typedef {import('./frames.js').Conversation} Conversation
 * @typedef {import('./frames.js').ContextSnapshot} ContextSnapshot
 * @typedef {import('./frames.js').CommandProposal} CommandProposal
 */

export class OperatorClient {
  /** @param {Api} api */
  constructor(api) {
    this.api = api;
  }
  /** @param {{status?: string, limit?: number, cursor?: string, q?: string}} [o] @returns {Promise<{conversations: Conversation[], nextCursor?: string}>} */
  listConversations(o = {}) { return this.api.get('/api/operator/conversations' + query(o)); }
  /** @param {{title?: string, project?: string}} [body] @returns {Promise<Conversation>} */
  createConversation(body = {}) { return this.api.post('/api/operator/conversations', body); }
  /** @param {string} id @param {number} after @param {number} [limit] @returns {Promise<{conversation: Conversation, frames: any[], hasMore: boolean, nextAfterSequence: number, latestSequence: number, activeTurn?: import("./dock/progress.js").TurnProgress}>} */
  getConversation(id, after = 0, limit = 500) { return this.api.get(`/api/operator/conversations/${enc(id)}` + query({ after_sequence: after, limit })); }
  /** @param {string} id @param {{title?: string, status?: 'active'|'archived', pinned?: boolean, model?: string}} body @returns {Promise<Conversation>} */
  updateConversation(id, body) { return this.api.patch(`/api/operator/conversations/${enc(id)}`, body); }
  /** @param {string} id @returns {Promise<Conversation>} */
  deleteConversation(id) { return this.api.del(`/api/operator/conversations/${enc(id)}`); }
  /**
   * Submits one turn, once. A failure is returned to the caller, never retried here.
   * whenBusy says what it does while another turn runs (absent: conflict).
   * @param {string} id @param {string} instruction @param {ContextSnapshot} context @param {number} expectedLastSequence
   * @param {'enqueue'|'interrupt'} [whenBusy]
   * @returns {Promise<{conversationId: string, requestId: string, acceptedSequence?: number, waiting?: number, interrupted?: string}>}
   */
  submitTurn(id, instruction, context, expectedLastSequence, whenBusy) {
    return this.api.post(`/api/operator/conversations/${enc(id)}/turns`, { instruction, context, expectedLastSequence, ...(whenBusy ? { whenBusy } : {}) });
  }
  /** @param {string} id @param {string} requestId */
  cancel(id, requestId) { return this.api.post(`/api/operator/conversations/${enc(id)}/requests/${enc(requestId)}/cancel`); }
  /**
   * @param {string} id @param {string} effectId
   * @param {{status: 'applied', clientRoute: string} | {status: 'rejected', rejectionCode: string}} body
   */
  ackEffect(id, effectId, body) { return this.api.post(`/api/operator/conversations/${enc(id)}/effects/${enc(effectId)}/ack`, body); }
  /**
   * An effect's current state on the server: pending until some client
   * acknowledges it; expired once stale.
   * @param {string} id @param {string} effectId
   * @returns {Promise<{effectId: string, status: 'pending'|'applied'|'rejected'|'expired', clientRoute: string|null, rejectionCode: string|null, acknowledgedAt: number|null, expiresAt: number}>}
   */
  getEffect(id, effectId) { return this.api.get(`/api/operator/conversations/${enc(id)}/effects/${enc(effectId)}`); }
  /**
   * Confirms a proposal with the hash and target version it was shown with.
   * @param {string} id @param {CommandProposal} proposal
   */
  confirmProposal(id, proposal) {
    /** @type {{expectedCommandHash: string, expectedTargetVersion?: number | string}} */
    const body = { expectedCommandHash: proposal.commandHash };
    if (proposal.target) body.expectedTargetVersion = proposal.target.version;
    return this.api.post(`/api/operator/conversations/${enc(id)}/proposals/${enc(proposal.id)}/confirm`, body);
  }
  /** @param {string} id @param {string} proposalId */
  denyProposal(id, proposalId) { return this.api.post(`/api/operator/conversations/${enc(id)}/proposals/${enc(proposalId)}/deny`); }
  /** @param {string} id @returns {Promise<{proposals: any[]}>} */
  listProposals(id) { return this.api.get(`/api/operator/conversations/${enc(id)}/proposals`); }
  /** @param {string} id @param {string} proposalId @returns {Promise<import('../../types/wire').ProposalState>} */
  getProposal(id, proposalId) { return this.api.get(`/api/operator/conversations/${enc(id)}/proposals/${enc(proposalId)}`); }
  /** @param {string} conversationId @param {number} afterSequence @returns {Promise<{ticket: string, expiresAt: number}>} */
  createTicket(conversationId, afterSequence) { return this.api.post('/api/operator/stream-tickets', { conversationId, afterSequence }); }
  /** @returns {Promise<any>} */
  routes() { return this.api.get('/api/operator/routes'); }
  /** @returns {Promise<{tools: {id: string, class: string, inputSchema: any}[]}>} */
  tools() { return this.api.get('/api/operator/tools'); }
  /**
   * Forks a conversation after the done frame upToSequence (omitted: the newest).
   * @param {string} id @param {{upToSequence?: number, title?: string}} body
   * @returns {Promise<{conversation: Conversation, frames: any[], hasMore: boolean, nextAfterSequence: number, latestSequence: number}>}
   */
  forkConversation(id, body) { return this.api.post(`/api/operator/conversations/${enc(id)}/fork`, body); }
  /** @param {string} id @returns {Promise<Conversation>} */
  restoreConversation(id) { return this.api.post(`/api/operator/conversations/${enc(id)}/restore`); }
  /** @returns {Promise<{models: {name: string, provider: string, model?: string, default: boolean, reachable: boolean, problem?: string}[], default: string}>} */
  models() { return this.api.get('/api/operator/models'); }
  /**
   * Reports what the operator looks at while a turn runs (best effort).
   * @param {string} id @param {ContextSnapshot} view @param {number} observedAt Unix seconds
   */
  reportView(id, view, observedAt) { return this.api.post(`/api/operator/conversations/${enc(id)}/view`, { ...view, observedAt }); }
  /**
   * Replaces a pending proposal with an edited command; answers the new proposal.
   * @param {string} id @param {CommandProposal} proposal @param {Record<string, any>} command
   * @returns {Promise<CommandProposal & {status: string}>}
   */
  amendProposal(id, proposal, command) {
    return this.api.post(`/api/operator/conversations/${enc(id)}/proposals/${enc(proposal.id)}/amend`, { expectedCommandHash: proposal.commandHash, command });
  }
}
