// Frames of the operator protocol (docs/protocol.md §3; docs/design.md §4): the wire
// types and strict validation. A frame that fails validation is never
// applied: the stream stops with a visible protocol error.

/** The frame types of version 1. */
export const FRAME_TYPES = /** @type {const} */ (['text', 'tool_call', 'tool_result', 'ui_command', 'proposal', 'confirmation', 'error', 'done']);
export const PROTOCOL_VERSION = 1;

/**
 * @typedef {'text'|'tool_call'|'tool_result'|'ui_command'|'proposal'|'confirmation'|'error'|'done'} FrameType
 * @typedef {{version: 1, conversationId: string, requestId: string, sequence: number, type: FrameType, payload: any, createdAt: number}} Frame
 * @typedef {{kind: string, space?: string, params?: Record<string, any>, selection?: Record<string, string>, form?: string, values?: Record<string, any>, theme?: string}} Effect
 * @typedef {{effectId: string, effect: Effect, expiresAt: number}} UiCommandPayload
 * @typedef {{kind: string, id: string, version: number | string}} ResourceVersion  (an integer; frames stored before the wire rule may hold a string)
 * @typedef {{id: string, commandType: string, command: Record<string, any>, commandHash: string, risk: 'mutate'|'execute'|'admin', summary: string, target: ResourceVersion | null, idempotencyKey: string, expiresAt: number, impact?: 'destructive'|'irreversible', targetName?: string, amends?: string, origin?: 'turn'|'request'}} CommandProposal
 * @typedef {{space: string, route: string, project?: string, selection?: Record<string, string>, filters?: Record<string, any>}} ContextSnapshot
 * @typedef {{conversationId: string, sequence: number, copiedThrough: number}} ForkOrigin
 * @typedef {{id: string, project: string|null, title: string|null, status: string, lastSequence: number, activeRequestId: string|null, createdAt: number, updatedAt: number, archivedAt: number|null, pinned?: boolean, model?: string|null, forkedFrom?: ForkOrigin|null, deletedAt?: number}} Conversation
 */

/** A frame the client must not apply: unknown version or type, or a malformed envelope. */
export class FrameError extends Error {
  /** @param {string} code protocol_version | protocol @param {string} message */
  constructor(code, message) {
    super(message);
    this.name = 'FrameError';
    this.code = code;
  }
}

/** @param {unknown} v @returns {v is Record<string, any>} */
export function isObject(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** @param {unknown} v */
function isString(v) {
  return typeof v === 'string' && v.length > 0;
}

/**
 * Parses and validates one frame. Throws FrameError for an unknown version,
 * an unknown type, or a payload that does not have its type's shape.
 * @param {string | unknown} data the data of one SSE event, or a decoded object
 * @returns {Frame}
 */
export function parseFrame(data) {
  /** @type {unknown} */
  let f = data;
  if (typeof data === 'string') {
    try {
      f = JSON.parse(data);
    } catch {
      throw new FrameError('protocol', 'a stream event is not JSON');
    }
  }
  if (!isObject(f)) throw new FrameError('protocol', 'a frame is not an object');
  if (f.version !== PROTOCOL_VERSION) {
    throw new FrameError('protocol_version', `frame version ${JSON.stringify(f.version)} is not supported (this cockpit speaks version ${PROTOCOL_VERSION})`);
  }
  if (!FRAME_TYPES.includes(f.type)) {
    throw new FrameError('protocol', `unknown frame type ${JSON.stringify(f.type)}`);
  }
  if (!isString(f.conversationId) || !isString(f.requestId)) throw new FrameError('protocol', 'frame lacks conversationId or requestId');
  if (!Number.isInteger(f.sequence) || f.sequence < 1) throw new FrameError('protocol', 'frame sequence must be a positive integer');
  if (typeof f.createdAt !== 'number') throw new FrameError('protocol', 'frame lacks createdAt');
  const p = f.payload;
  if (!isObject(p)) throw new FrameError('protocol', `${f.type} frame has no payload object`);
  const bad = (/** @type {string} */ what) => new FrameError('protocol', `${f.type} frame ${what}`);
  switch (f.type) {
    case 'text':
      if (typeof p.content !== 'string' || (p.format !== 'plain' && p.format !== 'markdown')) throw bad('needs content and a plain or markdown format');
      break;
    case 'tool_call':
      if (!isString(p.callId) || !isString(p.tool) || !isObject(p.arguments)) throw bad('needs callId, tool and arguments');
      break;
    case 'tool_result':
      if (!isString(p.callId) || typeof p.ok !== 'boolean') throw bad('needs callId and ok');
      if (!p.ok && !isObject(p.error)) throw bad('that failed needs an error');
      break;
    case 'ui_command':
      if (!isString(p.effectId) || !isObject(p.effect) || typeof p.effect.kind !== 'string' || typeof p.expiresAt !== 'number') throw bad('needs effectId, effect and expiresAt');
      break;
    case 'proposal': {
      const pr = p.proposal;
      if (!isObject(pr) || !isString(pr.id) || !isString(pr.commandHash) || !isString(pr.commandType) || !isObject(pr.command) ||
        !['mutate', 'execute', 'admin'].includes(pr.risk) || typeof pr.expiresAt !== 'number' || typeof pr.summary !== 'string') {
        throw bad('needs a proposal with id, commandType, command, commandHash, risk, summary and expiresAt');
      }
      if (pr.target !== null && pr.target !== undefined && !(isObject(pr.target) && (Number.isInteger(pr.target.version) || typeof pr.target.version === 'string'))) throw bad('target must be {kind, id, version} or null');
      if (pr.impact !== undefined && !['destructive', 'irreversible'].includes(pr.impact)) throw bad('impact must be destructive or irreversible when present');
      if (pr.targetName !== undefined && typeof pr.targetName !== 'string') throw bad('targetName must be a string when present');
      if (pr.origin !== undefined && !['turn', 'request'].includes(pr.origin)) throw bad('origin must be turn or request when present');
      break;
    }
    case 'confirmation':
      // Unknown states are allowed: they are treated as terminal and unapplied (docs/design.md §4).
      if (!isString(p.proposalId) || !isString(p.state)) throw bad('needs proposalId and state');
      break;
    case 'error':
      if (!isObject(p.error) || typeof p.error.code !== 'string') throw bad('needs an error with a code');
      break;
    case 'done':
      if (!['completed', 'failed', 'cancelled'].includes(p.outcome) || !Number.isInteger(p.lastSequence)) throw bad('needs outcome and lastSequence');
      break;
  }
  return /** @type {Frame} */ (f);
}
