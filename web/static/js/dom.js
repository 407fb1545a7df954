// DOM building without HTML strings: every text goes through textContent or
// a Text node, so nothing from the daemon or a model is ever parsed as markup.

/**
 * @typedef {string | number | Node | null | undefined | false | any[]} Child
 * @typedef {Record<string, any>} Attrs
 */

/**
 * Creates an element. Attributes: class, text (textContent), on<Event>
 * (listeners, never attributes), dataset, style (an object: CSSOM, allowed
 * by the CSP, unlike style attributes), boolean properties, and strings
 * set with setAttribute (aria-*, role, id, for, type, ...).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs | null} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = Array.isArray(v) ? v.filter(Boolean).join(' ') : String(v);
      else if (k === 'text') el.textContent = String(v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2).toLowerCase(), v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
      else if (k === 'value' || k === 'checked' || k === 'selected' || k === 'disabled' || k === 'hidden' || k === 'open' || k === 'required' || k === 'readOnly' || k === 'multiple') {
        /** @type {any} */ (el)[k] = v;
      } else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

/** @param {Node} parent @param {Child[]} children */
export function append(parent, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(parent, c);
    else if (c instanceof Node) parent.appendChild(c);
    else parent.appendChild(document.createTextNode(String(c)));
  }
}

/** Replaces an element's children. @param {Element} el @param {...Child} children */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let idSeq = 0;
/** A unique id for label/aria wiring. @param {string} prefix */
export function uid(prefix = 'id') {
  idSeq++;
  return `${prefix}-${idSeq}`;
}

const SVG = 'http://www.w3.org/2000/svg';
/**
 * A small inline icon (built with the DOM; no image request, no HTML).
 * @param {string} d an SVG path
 */
export function icon(d) {
  const s = document.createElementNS(SVG, 'svg');
  s.setAttribute('viewBox', '0 0 24 24');
  s.setAttribute('width', '18');
  s.setAttribute('height', '18');
  s.setAttribute('aria-hidden', 'true');
  s.setAttribute('focusable', 'false');
  s.classList.add('icon');
  const p = document.createElementNS(SVG, 'path');
  p.setAttribute('d', d);
  s.appendChild(p);
  return s;
}

/** @param {number | null | undefined} ms */
export function fmtDuration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - m * 60)} s`;
}

/** A status badge. @param {string} status */
export function badge(status) {
  return h('span', { class: ['badge', 'badge-' + status.replace(/[^a-z_]/g, '')], text: status });
}
