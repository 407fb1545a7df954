// HTTP access to the daemon: JSON requests with the bearer header, typed
// errors. Used by the protocol client and by every cockpit space. The token
// only ever travels in the Authorization header, never in a URL.

import { errorSentence } from './words.js';

/**
 * @typedef {{code: string, message: string, retryable?: boolean, retryAfterMs?: number, details?: Record<string, any>}} ProtocolErrorBody
 */

/** An HTTP or protocol error with the daemon's stable code. */
export class ApiError extends Error {
  /**
   * @param {number} status HTTP status, 0 for a network failure
   * @param {ProtocolErrorBody} body
   */
  constructor(status, body) {
    super(body.message || body.code);
    this.name = 'ApiError';
    this.status = status;
    this.code = body.code;
    this.retryable = !!body.retryable;
    this.retryAfterMs = body.retryAfterMs;
    /** @type {Record<string, any>} */
    this.details = body.details || {};
  }
}

/**
 * A direct command the daemon did not run: it needs a second approver and
 * became a pending proposal (202, Location its proposal), which another
 * principal confirms or denies in the approvals inbox. Callers that show
 * errors show its message, "Sent for approval: waiting for another
 * approver", in place of one.
 */
export class SentForApproval extends Error {
  /** @param {any} proposal the pending proposal, with its message */
  constructor(proposal) {
    super(proposal && typeof proposal.message === 'string' ? proposal.message : 'Sent for approval: waiting for another approver');
    this.name = 'SentForApproval';
    this.proposal = proposal;
  }
}

/** Where a direct command's 202 points when it was sent for approval. */
const approvalLocation = '/api/operator/proposals/';

/**
 * Shows a failed action's error in el; a command sent for approval shows
 * its message as news, not as a failure (data-sent-for-approval).
 * @param {HTMLElement} el
 * @param {unknown} e
 */
export function showError(el, e) {
  el.textContent = errorText(e);
  if (e instanceof SentForApproval) el.dataset.sentForApproval = e.proposal && e.proposal.id ? e.proposal.id : '';
  else delete el.dataset.sentForApproval;
}

/**
 * @typedef {object} ApiOptions
 * @property {string} [baseUrl] origin of the daemon, '' for this page's
 * @property {() => string | null} getToken the bearer token
 * @property {typeof fetch} [fetch]
 * @property {(err: ApiError) => void} [onAuthError] called on 401
 */

export class Api {
  /** @param {ApiOptions} opts */
  constructor(opts) {
    this.baseUrl = (opts.baseUrl || '').replace(/\/$/, '');
    this.getToken = opts.getToken;
    this.fetchImpl = opts.fetch || globalThis.fetch.bind(globalThis);
    this.onAuthError = opts.onAuthError;
  }

  /** @returns {Record<string, string>} */
  headers() {
    /** @type {Record<string, string>} */
    const h = { Accept: 'application/json' };
    const t = this.getToken();
    if (t) h.Authorization = 'Bearer ' + t;
    return h;
  }

  /**
   * Sends one request and decodes the JSON answer. Errors become ApiError.
   * @param {string} method
   * @param {string} path absolute path, e.g. /api/app/runs?status=failed
   * @param {unknown} [body]
   * @param {{signal?: AbortSignal}} [opts]
   * @returns {Promise<any>}
   */
  async request(method, path, body, opts = {}) {
    const headers = this.headers();
    /** @type {RequestInit} */
    // same-origin: behind a sign-in proxy its session cookie must reach the
    // proxy; the daemon itself reads only the Authorization header.
    const init = { method, headers, cache: 'no-store', credentials: 'same-origin', signal: opts.signal };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await this.fetchImpl(this.baseUrl + path, init);
    } catch (e) {
      if (e instanceof Error && e.name === 'AbortError') throw e;
      throw new ApiError(0, { code: 'network', message: 'the daemon cannot be reached: ' + String(e instanceof Error ? e.message : e), retryable: true });
    }
    const text = await res.text();
    /** @type {any} */
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = null;
      }
    }
    if (!res.ok) {
      const err = new ApiError(res.status, data && data.error && typeof data.error.code === 'string'
        ? data.error
        : { code: res.status === 404 ? 'not_found' : 'service_failure', message: `HTTP ${res.status}` + (text && !data ? ': ' + text.slice(0, 200) : '') });
      if (res.status === 401 && this.onAuthError) this.onAuthError(err);
      throw err;
    }
    if (res.status === 202 && (res.headers.get('Location') || '').startsWith(approvalLocation)) throw new SentForApproval(data);
    return data;
  }

  /** @param {string} path */
  get(path) { return this.request('GET', path); }
  /** @param {string} path @param {unknown} [body] */
  post(path, body) { return this.request('POST', path, body === undefined ? {} : body); }
  /** @param {string} path @param {unknown} body */
  patch(path, body) { return this.request('PATCH', path, body); }
  /** @param {string} path */
  del(path) { return this.request('DELETE', path); }
}

/**
 * Builds a query string from the defined, non-empty values.
 * @param {Record<string, string | number | boolean | undefined | null>} params
 */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

/** A path segment, escaped. @param {string} s */
export function enc(s) {
  return encodeURIComponent(s);
}

/** An error in words, then its code and the field it concerns. @param {unknown} e */
export function errorText(e) {
  if (e instanceof ApiError) {
    const field = e.details && e.details.field ? `, field ${e.details.field}` : '';
    return `${errorSentence(e)} (${e.code}${field})`;
  }
  return e instanceof Error ? e.message : String(e);
}
