// The Studio application API (/api/app/...): what the cockpit uses without
// the dock and without any model. One place names every path.

import { query, enc } from './api.js';

/**
 * @typedef {import('./api.js').Api} Api
 * @typedef {{name: string, description?: string, required?: boolean, default?: string}} PlaybookArg
 * @typedef {{id: string, project: string, name: string, description: string, prompt: string, args: PlaybookArg[], version: number, createdAt: number, updatedAt: number}} Playbook
 * @typedef {{playbookId: string, playbookName: string, input: string, args: Record<string, string>}} WorkflowStep
 * @typedef {{id: string, project: string, name: string, description: string, steps: WorkflowStep[], version: number, createdAt: number, updatedAt: number}} Workflow
 * @typedef {{id: string, playbookId: string, playbookName: string, playbookVersion: number, input: string, args: Record<string, string>, status: string, trigger: string, scheduleId: string|null, retryOf: string|null, output: string, outputTruncated: boolean, error: {code: string, message: string}|null, version: number, createdAt: number, updatedAt: number, startedAt: number|null, endedAt: number|null, durationMs: number|null, workflowId?: string, workflowStep?: number}} Run
 * @typedef {{id: string, name: string, cron: string, playbookId: string, playbookName: string, input: string, args: Record<string, string>, enabled: boolean, nextRunAt: number|null, lastRunAt: number|null, lastRunId: string|null, skippedRuns: number, version: number, createdAt: number, updatedAt: number}} Schedule
 * @typedef {{id: number, createdAt: number, actor: string, action: string, targetId: string|null, details: any}} AuditEvent
 */

export class AppApi {
  /** @param {Api} api */
  constructor(api) {
    this.api = api;
  }

  // Playbooks
  /** @param {{q?: string, limit?: number, cursor?: string}} [o] @returns {Promise<{playbooks: Playbook[], nextCursor?: string}>} */
  listPlaybooks(o = {}) { return this.api.get('/api/app/playbooks' + query(o)); }
  /** @param {string} ref @returns {Promise<Playbook>} */
  getPlaybook(ref) { return this.api.get(`/api/app/playbooks/${enc(ref)}`); }
  /** @param {any} body @returns {Promise<any>} */
  createPlaybook(body) { return this.api.post('/api/app/playbooks', body); }
  /** @param {string} ref @param {any} body @returns {Promise<any>} */
  updatePlaybook(ref, body) { return this.api.patch(`/api/app/playbooks/${enc(ref)}`, body); }
  /** @param {string} ref */
  deletePlaybook(ref) { return this.api.del(`/api/app/playbooks/${enc(ref)}`); }

  // Workflows
  /** @param {{q?: string, limit?: number}} [o] @returns {Promise<{workflows: Workflow[], nextCursor?: string}>} */
  listWorkflows(o = {}) { return this.api.get('/api/app/workflows' + query(o)); }
  /** @param {string} ref @returns {Promise<Workflow>} */
  getWorkflow(ref) { return this.api.get(`/api/app/workflows/${enc(ref)}`); }
  /** @param {any} body */
  createWorkflow(body) { return this.api.post('/api/app/workflows', body); }
  /** @param {string} ref @param {any} body */
  updateWorkflow(ref, body) { return this.api.patch(`/api/app/workflows/${enc(ref)}`, body); }
  /** @param {string} ref @param {number} [expectedVersion] @returns {Promise<{workflow: Workflow, runs: Run[]}>} */
  launchWorkflow(ref, expectedVersion) { return this.api.post(`/api/app/workflows/${enc(ref)}/launch`, expectedVersion ? { expectedVersion } : {}); }
  /** @param {string} ref @param {number} [expectedVersion] */
  deleteWorkflow(ref, expectedVersion) { return this.api.del(`/api/app/workflows/${enc(ref)}` + query({ expectedVersion })); }

  // Runs
  /** @param {{status?: string, playbook?: string, trigger?: string, q?: string, workflow?: string, counts?: string, since?: string, until?: string, limit?: number, cursor?: string}} [o] @returns {Promise<{runs: Run[], nextCursor?: string, counts?: Record<string, number>, total?: number}>} */
  listRuns(o = {}) { return this.api.get('/api/app/runs' + query(o)); }
  /**
   * Runs between consecutive edges by status, and the duration spread.
   * @param {number[]} edges Unix seconds, increasing
   * @returns {Promise<{buckets: {start: number, end: number, counts: Record<string, number>, total: number}[], total: number, durations: {bins: {label: string, minMs: number, maxMs: number | null, count: number}[], count: number, medianMs: number | null, p90Ms: number | null}}>}
   */
  runActivity(edges) { return this.api.get('/api/app/runs/activity' + query({ edges: edges.map((e) => String(Math.round(e * 1000) / 1000)).join(',') })); }
  /** @param {string} id @returns {Promise<Run>} */
  getRun(id) { return this.api.get(`/api/app/runs/${enc(id)}`); }
  /** @param {{playbook: string, input?: string, args?: Record<string, string>}} body */
  launchRun(body) { return this.api.post('/api/app/runs', body); }
  /** @param {string} id */
  cancelRun(id) { return this.api.post(`/api/app/runs/${enc(id)}/cancel`); }
  /** @param {string} id */
  retryRun(id) { return this.api.post(`/api/app/runs/${enc(id)}/retry`); }
  /** @param {'24h'|'7d'} window @returns {Promise<{window: string, total: number, counts: Record<string, number>, medianDurationMs: number|null}>} */
  runStats(window) { return this.api.get('/api/app/runs/stats' + query({ window })); }

  // Schedules
  /** @param {{enabled?: string, q?: string, limit?: number}} [o] @returns {Promise<{schedules: Schedule[], nextCursor?: string}>} */
  listSchedules(o = {}) { return this.api.get('/api/app/schedules' + query(o)); }
  /** @param {string} ref @returns {Promise<Schedule>} */
  getSchedule(ref) { return this.api.get(`/api/app/schedules/${enc(ref)}`); }
  /** @param {any} body */
  createSchedule(body) { return this.api.post('/api/app/schedules', body); }
  /** @param {string} ref @param {any} body */
  updateSchedule(ref, body) { return this.api.patch(`/api/app/schedules/${enc(ref)}`, body); }
  /** @param {string} ref @param {boolean} enabled @param {number} [expectedVersion] */
  setScheduleEnabled(ref, enabled, expectedVersion) {
    return this.api.post(`/api/app/schedules/${enc(ref)}/${enabled ? 'enable' : 'disable'}`, expectedVersion ? { expectedVersion } : {});
  }
  /** @param {string} ref */
  deleteSchedule(ref) { return this.api.del(`/api/app/schedules/${enc(ref)}`); }
  /** @param {string} cron @param {number} [count] @returns {Promise<{cron: string, next: number[]}>} */
  previewCron(cron, count = 5) { return this.api.get('/api/app/schedules/preview' + query({ cron, count })); }

  // System and audit
  /** @returns {Promise<any>} */
  health() { return this.api.get('/api/app/system/health'); }
  /** @returns {Promise<any>} the doctor's count of the work in flight only */
  healthWork() { return this.api.get('/api/app/system/health?part=work'); }
  /** @param {string} action @returns {Promise<any>} */
  maintenance(action) { return this.api.post('/api/app/system/maintenance', { action }); }
  /** @param {{limit?: number, cursor?: string, action?: string, targetId?: string, actor?: string, commandType?: string, target?: string, since?: string, until?: string}} [o] @returns {Promise<{events: AuditEvent[], nextCursor?: string}>} */
  audit(o = {}) { return this.api.get('/api/app/audit' + query(o)); }
  /** @returns {Promise<{actors: string[]}>} who appears in the audit trail */
  auditActors() { return this.api.get('/api/app/audit/actors'); }
  /** @param {'1h'|'24h'} window @returns {Promise<{since: number, until: number, buckets: {start: number, end: number, turns: number, failed: number, medianMs: number | null, maxMs: number | null, modelErrors: Record<string, number>}[], kept: {turns: number, failures: number}}>} */
  operatorActivity(window) { return this.api.get('/api/app/system/operator' + query({ window })); }
}
