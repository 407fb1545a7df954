// Charts as inline SVG built with the DOM (no library, no CDN, nothing the
// CSP forbids: colours come from the stylesheet's classes). Every chart is
// a figure with a caption that says what it shows in words, an SVG labelled
// for assistive technology, and its numbers as a table beneath.

import { h } from './dom.js';

const SVG = 'http://www.w3.org/2000/svg';

/**
 * @param {string} tag @param {Record<string, string | number>} [attrs] @param {...(Node | string)} children
 * @returns {SVGElement}
 */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c);
  return el;
}

/**
 * @typedef {{key: string, label: string}} Series
 * @typedef {{label: string, values: Record<string, number>}} Column
 * @typedef {object} BarChart
 * @property {string} title what the chart shows
 * @property {string} summary the chart in one or two sentences of words
 * @property {Series[]} series stacked bottom to top; key is also the colour class (series-<key>)
 * @property {Column[]} columns
 * @property {string} [unit] what a value counts, for the table header
 * @property {number} [labelEvery] label every nth column on the axis
 */

/**
 * A stacked bar chart.
 * @param {BarChart} c
 */
export function barChart(c) {
  // About the size it is drawn at, so that its text is about the page's.
  const W = 420;
  const H = 170;
  const pad = { l: 28, r: 6, t: 8, b: 22 };
  const totals = c.columns.map((col) => c.series.reduce((n, sr) => n + (col.values[sr.key] || 0), 0));
  const max = Math.max(1, ...totals);
  const ticks = niceTicks(max);
  const top = ticks[ticks.length - 1];
  const iw = W - pad.l - pad.r;
  const ih = H - pad.t - pad.b;
  const bw = iw / c.columns.length;
  const y = (/** @type {number} */ v) => pad.t + ih - (v / top) * ih;
  const every = c.labelEvery || 1;
  const titleId = 'chart-' + Math.random().toString(36).slice(2, 9);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-labelledby': titleId + '-t ' + titleId + '-d' },
    s('title', { id: titleId + '-t' }, c.title),
    s('desc', { id: titleId + '-d' }, c.summary));
  for (const t of ticks) {
    svg.append(s('line', { x1: pad.l, x2: W - pad.r, y1: y(t), y2: y(t), class: 'grid' }),
      s('text', { x: pad.l - 4, y: y(t) + 4, 'text-anchor': 'end', class: 'axis' }, String(t)));
  }
  c.columns.forEach((col, i) => {
    let acc = 0;
    const x = pad.l + i * bw + bw * 0.15;
    const g = s('g', {});
    for (const sr of c.series) {
      const v = col.values[sr.key] || 0;
      if (v > 0) {
        g.append(s('rect', { x, width: Math.max(1, bw * 0.7), y: y(acc + v), height: Math.max(0.5, y(acc) - y(acc + v)), class: 'series-' + sr.key },
          s('title', {}, `${col.label}: ${v} ${sr.label}`)));
      }
      acc += v;
    }
    svg.append(g);
    if (i % every === 0 || i === c.columns.length - 1) {
      svg.append(s('text', { x: pad.l + i * bw + bw / 2, y: H - 6, 'text-anchor': 'middle', class: 'axis' }, col.label));
    }
  });
  svg.append(s('line', { x1: pad.l, x2: W - pad.r, y1: y(0), y2: y(0), class: 'baseline' }));
  return h('figure', { class: 'chart-figure' },
    h('figcaption', null, h('strong', { text: c.title }), h('span', { class: 'muted small', text: ' ' + c.summary })),
    svg,
    c.series.length > 1 ? h('ul', { class: 'legend', 'aria-hidden': 'true' }, c.series.map((sr) => h('li', null, h('span', { class: 'swatch series-' + sr.key }), sr.label))) : null,
    dataTable(c));
}

/** The chart's numbers as a table, behind a disclosure. @param {BarChart} c */
function dataTable(c) {
  return h('details', { class: 'chart-data' }, h('summary', { text: 'Show the numbers' }),
    h('div', { class: 'table-wrap' }, h('table', { class: 'table' },
      h('caption', { class: 'visually-hidden', text: c.title }),
      h('thead', null, h('tr', null, h('th', { scope: 'col', text: '' }), c.series.map((sr) => h('th', { scope: 'col', class: 'num', text: sr.label })),
        c.series.length > 1 ? h('th', { scope: 'col', class: 'num', text: 'Total' }) : null)),
      h('tbody', null, c.columns.map((col) => h('tr', null, h('th', { scope: 'row', text: col.label }),
        c.series.map((sr) => h('td', { class: 'num', text: String(col.values[sr.key] || 0) })),
        c.series.length > 1 ? h('td', { class: 'num', text: String(c.series.reduce((n, sr) => n + (col.values[sr.key] || 0), 0)) }) : null))))));
}

/** Round axis ticks from 0 to at least max: 0, step, 2·step, … @param {number} max */
export function niceTicks(max) {
  const raw = max / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((st) => st >= raw) || 10 * mag;
  const whole = Math.max(1, Math.round(step));
  const out = [];
  for (let v = 0; v < max + whole; v += whole) {
    out.push(v);
    if (v >= max) break;
  }
  return out;
}
