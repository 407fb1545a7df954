// The streaming Markdown renderer renders exactly what a full render of the
// same text renders, for every prefix of every answer in a corpus, however
// the text is cut into chunks: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { parse, render, MarkdownStream, MarkdownView } from '../static/js/markdown.js';

const CORPUS = [
  'I asked the cockpit to show the **failed runs**; the request above shows whether your browser applied it.',
  'In the last 24 hours, 3 runs failed, out of 7 runs in all.',
  '# Runs\n\nThree runs *failed* today:\n\n- `audit-repo` on acme/api\n- `summarize-failed-runs`\n  (twice, the second a retry)\n- write-release-notes\n\nSee [the fleet](/?view=fleet&status=failed) for details.',
  '## Health\n\nStatus: **degraded**\n\n1. The WAL is large\n2) A proposal is indeterminate\n3. The model provider is down\n\n> Run a checkpoint from System → Maintenance.\n> It is safe.\n\nDone.',
  'Here is the prompt:\n\n```text\nAudit {{input}}\n\nList the findings.\n```\n\nAnd a second block:\n\n```\nno language\n```\nafter the fence',
  'A fence that never closes:\n\n```js\nconst x = 1;\n\nlet y = x < 2;',
  'Windows line ends\r\nsecond line\r\n\r\n- item\r\n- item two\r\n\r\nend',
  'Old Mac line ends\rsecond line\r\r# Heading\rtext',
  'para one\n# heading right after\n- list right after\n> quote right after\nplain after quote\n```\ncode right after\n```\ntrailing',
  '*em* and **strong** and `code` and [link](https://example.com/a) and [bad](javascript:alert(1)) and \\*escaped\\*',
  '<script>alert(1)</script> stays text, as does <img src=x onerror=alert(1)>',
  '-\n- \n-  x\n  continued\n    deeper\n\n\n\n1.\n1. one\n   more\n',
  '   \n\n  # not quite\n#no space\n####### seven\n```   \n```py x\nnot a fence\n```',
  '',
  '\n\n\n',
  '> a\n>\n> b\n\n>c\nd',
];

/** A small seeded generator, so a failure names a reproducible cut. @param {number} seed */
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** @param {string} text @param {number[]} cuts */
function chunksAt(text, cuts) {
  const out = [];
  let at = 0;
  for (const c of cuts) {
    out.push(text.slice(at, c));
    at = c;
  }
  out.push(text.slice(at));
  return out;
}

test('markdown stream: every prefix, one character at a time, equals a full parse', () => {
  for (const text of CORPUS) {
    const s = new MarkdownStream();
    const settled = [];
    for (let i = 0; i < text.length; i++) {
      const r = s.append(text[i]);
      settled.push(...r.settled);
      assert.deepEqual([...settled, ...r.live], parse(text.slice(0, i + 1)), `prefix ${i + 1} of ${JSON.stringify(text)}`);
    }
  }
});

test('markdown stream: random chunkings of each answer equal a full parse at every step', () => {
  const next = rng(16);
  for (const text of CORPUS) {
    for (let round = 0; round < 40; round++) {
      const cuts = [];
      for (let i = 1; i < text.length; i++) if (next() < 0.15) cuts.push(i);
      const s = new MarkdownStream();
      const settled = [];
      let sofar = '';
      for (const c of chunksAt(text, cuts)) {
        const r = s.append(c);
        sofar += c;
        settled.push(...r.settled);
        assert.deepEqual([...settled, ...r.live], parse(sofar), `cuts ${cuts} of ${JSON.stringify(text)}`);
      }
    }
  }
});

test('markdown stream: settled text is not parsed again', () => {
  const s = new MarkdownStream();
  for (let i = 0; i < 500; i++) s.append(`Paragraph ${i} with **bold** text.\n\n`);
  // Whatever came before, the unsettled text is the last block and the blank after it.
  assert.ok(s.tail.length < 60, `tail is ${s.tail.length} characters`);
  assert.equal(s.settled.length, 499);
});

// A minimal DOM: enough for render() and MarkdownView, serialisable.
class FakeNode {
  constructor(tag, text) {
    this.tag = tag;
    this.text = text;
    this.childNodes = [];
    this.attrs = {};
  }
  appendChild(n) {
    if (n.tag === '#fragment') {
      for (const c of n.childNodes) this.childNodes.push(c);
      n.childNodes = [];
    } else this.childNodes.push(n);
    return n;
  }
  removeChild(n) {
    const i = this.childNodes.indexOf(n);
    assert.ok(i >= 0, 'removeChild of a node that is not a child');
    this.childNodes.splice(i, 1);
    return n;
  }
  set textContent(v) { this.childNodes = [new FakeNode('#text', String(v))]; }
  set href(v) { this.attrs.href = v; }
  set rel(v) { this.attrs.rel = v; }
  set target(v) { this.attrs.target = v; }
  html() {
    if (this.tag === '#text') return this.text.replace(/&/g, '&amp;').replace(/</g, '&lt;');
    const inner = this.childNodes.map((c) => c.html()).join('');
    if (this.tag === '#fragment') return inner;
    const attrs = Object.entries(this.attrs).map(([k, v]) => ` ${k}="${v}"`).join('');
    return `<${this.tag}${attrs}>${inner}</${this.tag}>`;
  }
}
const fakeDoc = /** @type {any} */ ({
  createElement: (tag) => new FakeNode(tag),
  createTextNode: (t) => new FakeNode('#text', t),
  createDocumentFragment: () => new FakeNode('#fragment'),
});

test('markdown view: the DOM after every chunk is the DOM of a full render', () => {
  const next = rng(9);
  for (const text of CORPUS) {
    const el = new FakeNode('div');
    const view = new MarkdownView(/** @type {any} */ (el), fakeDoc);
    let sofar = '';
    let at = 0;
    while (at < text.length) {
      const n = 1 + Math.floor(next() * 7);
      const c = text.slice(at, at + n);
      at += n;
      sofar += c;
      view.append(c);
      const want = new FakeNode('div');
      want.appendChild(render(parse(sofar), fakeDoc));
      assert.equal(el.html(), want.html(), `after ${JSON.stringify(sofar)}`);
    }
  }
});

test('markdown view: a block keeps its node from live to settled; only changed blocks are rebuilt', () => {
  const el = new FakeNode('div');
  const view = new MarkdownView(/** @type {any} */ (el), fakeDoc);
  view.append('First paragraph, ');
  view.append('settled early.\n\n');
  const first = el.childNodes[0];
  view.append('- one\n- t');
  assert.equal(el.childNodes[0], first, 'the paragraph was rebuilt when it settled');
  const list = el.childNodes[1];
  view.append('wo');
  assert.equal(el.childNodes[0], first);
  assert.notEqual(el.childNodes[1], list, 'the changed list must be rebuilt');
  view.append('\n\nend');
  assert.equal(el.childNodes[0], first);
  assert.equal(el.childNodes.length, 3);
});
