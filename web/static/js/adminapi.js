// The admin API (/api/admin/...): principals, their personal tokens and
// webhooks. Every call needs the admin role; the Team tab of System is the
// only user.

import { enc, query } from './api.js';

/**
 * @typedef {import('./api.js').Api} Api
 * @typedef {import('../../types/wire').PrincipalView} PrincipalView
 * @typedef {import('../../types/wire').TokenView} TokenView
 * @typedef {import('../../types/wire').NewTokenView} NewTokenView
 * @typedef {{id: string, url: string, events: string[], format: string, createdAt: number, createdBy: string}} Webhook
 * @typedef {{id: string, event: string, status: 'pending'|'delivered'|'failed', attempts: number, lastStatus: number, lastError: string, createdAt: number, deliveredAt?: number | null, nextAttemptAt?: number | null}} Delivery
 */

/** The events a webhook may subscribe to, with what each means. */
export const WEBHOOK_EVENTS = [
  { id: 'proposal.pending', label: 'A proposal waits for a decision' },
  { id: 'proposal.decided', label: 'A proposal was confirmed or denied' },
  { id: 'turn.failed', label: 'An operator turn failed' },
  { id: 'run.failed', label: 'A run failed' },
];

export class AdminApi {
  /** @param {Api} api */
  constructor(api) {
    this.api = api;
  }

  /** @returns {Promise<{principals: PrincipalView[]}>} */
  principals() { return this.api.get('/api/admin/principals'); }
  /** @param {string} name @param {string} role @returns {Promise<PrincipalView>} */
  createPrincipal(name, role) { return this.api.post('/api/admin/principals', { name, role }); }
  /** @param {string} ref @param {string} role @returns {Promise<PrincipalView>} */
  setRole(ref, role) { return this.api.patch(`/api/admin/principals/${enc(ref)}`, { role }); }
  /** @param {string} ref @returns {Promise<PrincipalView>} */
  disablePrincipal(ref) { return this.api.del(`/api/admin/principals/${enc(ref)}`); }
  /** @param {string} ref @param {string} [expiresIn] e.g. 90d; omitted: never expires @returns {Promise<NewTokenView>} */
  createToken(ref, expiresIn) { return this.api.post(`/api/admin/principals/${enc(ref)}/tokens`, expiresIn ? { expiresIn } : {}); }
  /** @param {string} [principal] @returns {Promise<{tokens: TokenView[]}>} */
  tokens(principal) { return this.api.get('/api/admin/tokens' + query({ principal })); }
  /** @param {string} id @returns {Promise<TokenView>} */
  revokeToken(id) { return this.api.del(`/api/admin/tokens/${enc(id)}`); }

  /** @returns {Promise<{webhooks: Webhook[]}>} */
  webhooks() { return this.api.get('/api/admin/webhooks'); }
  /** @param {{url: string, events: string[], format: string}} body @returns {Promise<{webhook: Webhook, secret: string}>} */
  createWebhook(body) { return this.api.post('/api/admin/webhooks', body); }
  /** @param {string} id */
  deleteWebhook(id) { return this.api.del(`/api/admin/webhooks/${enc(id)}`); }
  /** @param {string} id @returns {Promise<{deliveries: Delivery[]}>} */
  deliveries(id) { return this.api.get(`/api/admin/webhooks/${enc(id)}/deliveries`); }
}
