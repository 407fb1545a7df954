// A small, safe Markdown renderer for model text. parse() turns text into a
// tree of plain objects; render() builds DOM nodes from it with
// createElement and Text nodes only. No model text is ever parsed as HTML:
// a "<script>" in the text is shown as the characters "<script>".
//
// Supported: paragraphs, #-### headings, - * + and 1. lists, ``` fenced
// code, > quotes, inline `code`, **bold**, *italic* / _italic_, and links
// [text](url) whose URL is http(s) or a same-origin path; anything else
// stays text.

/**
 * @typedef {{t: 'text', v: string} | {t: 'code', v: string} | {t: 'strong' | 'em', c: Inline[]} | {t: 'link', href: string, c: Inline[]}} Inline
 * @typedef {{t: 'p', c: Inline[]} | {t: 'h', level: number, c: Inline[]} | {t: 'ul' | 'ol', items: Inline[][]} | {t: 'pre', v: string, lang: string} | {t: 'quote', c: Inline[]}} Block
 */

/**
 * @param {string} text
 * @returns {Block[]}
 */
export function parse(text) {
  return parseLines(text.replace(/\r\n?/g, '\n').split('\n')).blocks;
}

/**
 * Parses lines into blocks; starts[i] is the line where blocks[i] begins.
 * At each block's start the parser holds no state, which is what lets the
 * streaming renderer re-parse only from the last block on.
 * @param {string[]} lines
 * @returns {{blocks: Block[], starts: number[]}}
 */
function parseLines(lines) {
  /** @type {Block[]} */
  const out = [];
  /** @type {number[]} */
  const starts = [];
  /** @type {string[]} */
  let para = [];
  let paraStart = 0;
  const flush = () => {
    if (para.length) {
      out.push({ t: 'p', c: inline(para.join('\n')) });
      starts.push(paraStart);
    }
    para = [];
  };
  /** @param {Block} b @param {number} at */
  const push = (b, at) => {
    out.push(b);
    starts.push(at);
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+-]*)\s*$/);
    if (fence) {
      flush();
      const at = i;
      const code = [];
      i++;
      while (i < lines.length && !/^\s*```\s*$/.test(lines[i])) code.push(lines[i++]);
      push({ t: 'pre', v: code.join('\n'), lang: fence[1] || '' }, at);
      continue;
    }
    const head = line.match(/^(#{1,6})\s+(.*)$/);
    if (head) {
      flush();
      push({ t: 'h', level: Math.min(head[1].length, 3), c: inline(head[2].trim()) }, i);
      continue;
    }
    const ul = line.match(/^\s*[-*+]\s+(.*)$/);
    const ol = line.match(/^\s*\d{1,9}[.)]\s+(.*)$/);
    if (ul || ol) {
      flush();
      const at = i;
      const kind = ul ? 'ul' : 'ol';
      const re = ul ? /^\s*[-*+]\s+(.*)$/ : /^\s*\d{1,9}[.)]\s+(.*)$/;
      /** @type {Inline[][]} */
      const items = [];
      while (i < lines.length) {
        const m = lines[i].match(re);
        if (m) items.push(inline(m[1]));
        else if (/^\s{2,}\S/.test(lines[i]) && items.length) {
          const last = items[items.length - 1];
          last.push({ t: 'text', v: ' ' }, ...inline(lines[i].trim()));
        } else break;
        i++;
      }
      i--;
      push({ t: kind, items }, at);
      continue;
    }
    const q = line.match(/^\s*>\s?(.*)$/);
    if (q) {
      flush();
      const at = i;
      const body = [q[1]];
      while (i + 1 < lines.length && /^\s*>/.test(lines[i + 1])) body.push(lines[++i].replace(/^\s*>\s?/, ''));
      push({ t: 'quote', c: inline(body.join('\n')) }, at);
      continue;
    }
    if (line.trim() === '') {
      flush();
      continue;
    }
    if (para.length === 0) paraStart = i;
    para.push(line);
  }
  flush();
  return { blocks: out, starts };
}

/**
 * Parses Markdown as it streams in, without re-parsing what is settled. A
 * block is settled once a later block has begun on a complete line: nothing
 * appended after that can change it. Each append re-parses only the text
 * from the first unsettled block on, so a long answer costs about its
 * length, not its length squared. The blocks so far (settled, then live)
 * are always exactly parse() of the whole text.
 */
export class MarkdownStream {
  constructor() {
    /** The unsettled text, line ends normalised to LF. */
    this.tail = '';
    /** The previous chunk ended in CR: an LF starting the next one belongs to it. */
    this.afterCR = false;
    /** @type {Block[]} */
    this.settled = [];
  }

  /**
   * Adds a chunk. Returns the blocks it settled (to keep) and the live
   * blocks (to replace the previous live ones).
   * @param {string} chunk
   * @returns {{settled: Block[], live: Block[]}}
   */
  append(chunk) {
    if (this.afterCR && chunk.startsWith('\n')) chunk = chunk.slice(1);
    if (chunk) this.afterCR = chunk.endsWith('\r');
    this.tail += chunk.replace(/\r\n?/g, '\n');
    const lines = this.tail.split('\n');
    /** @type {Block[]} */
    let settled = [];
    // Only complete lines decide: the last line may still grow.
    const complete = parseLines(lines.slice(0, -1));
    if (complete.blocks.length > 1) {
      const keep = complete.blocks.length - 1;
      settled = complete.blocks.slice(0, keep);
      const from = complete.starts[keep];
      this.tail = lines.slice(from).join('\n');
      lines.splice(0, from);
      this.settled.push(...settled);
    }
    return { settled, live: parseLines(lines).blocks };
  }
}

/**
 * Renders a streamed Markdown answer into an element. Each block is one
 * node; a node whose block did not change is kept (so a paragraph that
 * settles is the node that showed it while live), and only the changed
 * tail is built again.
 */
export class MarkdownView {
  /** @param {Element} el @param {Document} [doc] */
  constructor(el, doc = document) {
    this.el = el;
    this.doc = doc;
    this.stream = new MarkdownStream();
    /** The nodes of the live blocks, and what each showed. @type {Node[]} */
    this.live = [];
    /** @type {string[]} */
    this.keys = [];
  }

  /** @param {string} chunk */
  append(chunk) {
    const { settled, live } = this.stream.append(chunk);
    const blocks = [...settled, ...live];
    const keys = blocks.map((b) => JSON.stringify(b));
    let same = 0;
    while (same < this.live.length && same < blocks.length && this.keys[same] === keys[same]) same++;
    for (const n of this.live.slice(same)) this.el.removeChild(n);
    const frag = render(blocks.slice(same), this.doc);
    const nodes = [...this.live.slice(0, same), ...frag.childNodes];
    this.el.appendChild(frag);
    this.live = nodes.slice(settled.length);
    this.keys = keys.slice(settled.length);
  }
}

/** @param {string} href */
export function safeHref(href) {
  const s = href.trim();
  if (/^https?:\/\//i.test(s)) return s;
  if (s.startsWith('/') && !s.startsWith('//')) return s;
  return null;
}

/**
 * @param {string} s
 * @returns {Inline[]}
 */
export function inline(s) {
  /** @type {Inline[]} */
  const out = [];
  let text = '';
  const push = () => {
    if (text) out.push({ t: 'text', v: text });
    text = '';
  };
  let i = 0;
  while (i < s.length) {
    const ch = s[i];
    if (ch === '\\' && i + 1 < s.length && /[\\`*_[\]()#>+-.!]/.test(s[i + 1])) {
      text += s[i + 1];
      i += 2;
      continue;
    }
    if (ch === '`') {
      const end = s.indexOf('`', i + 1);
      if (end > i + 1) {
        push();
        out.push({ t: 'code', v: s.slice(i + 1, end) });
        i = end + 1;
        continue;
      }
    }
    if ((ch === '*' || ch === '_') && s[i + 1] === ch) {
      const end = s.indexOf(ch + ch, i + 2);
      if (end > i + 2) {
        push();
        out.push({ t: 'strong', c: inline(s.slice(i + 2, end)) });
        i = end + 2;
        continue;
      }
    }
    if ((ch === '*' || ch === '_') && s[i + 1] && s[i + 1] !== ' ' && s[i + 1] !== ch) {
      const end = s.indexOf(ch, i + 1);
      if (end > i + 1 && s[end - 1] !== ' ') {
        push();
        out.push({ t: 'em', c: inline(s.slice(i + 1, end)) });
        i = end + 1;
        continue;
      }
    }
    if (ch === '[') {
      const close = s.indexOf('](', i + 1);
      const end = close > 0 ? s.indexOf(')', close + 2) : -1;
      if (close > i && end > close) {
        const href = safeHref(s.slice(close + 2, end));
        const label = inline(s.slice(i + 1, close));
        push();
        if (href) out.push({ t: 'link', href, c: label });
        else out.push(...label, { t: 'text', v: ` (${s.slice(close + 2, end)})` });
        i = end + 1;
        continue;
      }
    }
    text += ch;
    i++;
  }
  push();
  return out;
}

/**
 * Renders parsed Markdown into a fragment of DOM nodes.
 * @param {Block[]} blocks
 * @param {Document} [doc]
 * @returns {DocumentFragment}
 */
export function render(blocks, doc = document) {
  const frag = doc.createDocumentFragment();
  /** @param {Node} parent @param {Inline[]} items */
  const inl = (parent, items) => {
    for (const it of items) {
      if (it.t === 'text') {
        const parts = it.v.split('\n');
        parts.forEach((p, j) => {
          if (j > 0) parent.appendChild(doc.createElement('br'));
          parent.appendChild(doc.createTextNode(p));
        });
      } else if (it.t === 'code') {
        const c = doc.createElement('code');
        c.textContent = it.v;
        parent.appendChild(c);
      } else if (it.t === 'link') {
        const a = doc.createElement('a');
        a.href = it.href;
        a.rel = 'noopener noreferrer';
        if (/^https?:/i.test(it.href)) a.target = '_blank';
        inl(a, it.c);
        parent.appendChild(a);
      } else {
        const e = doc.createElement(it.t);
        inl(e, it.c);
        parent.appendChild(e);
      }
    }
  };
  for (const b of blocks) {
    /** @type {HTMLElement} */
    let el;
    switch (b.t) {
      case 'p':
        el = doc.createElement('p');
        inl(el, b.c);
        break;
      case 'h':
        el = doc.createElement(/** @type {'h4'} */ ('h' + (b.level + 3)));
        inl(el, b.c);
        break;
      case 'ul':
      case 'ol':
        el = doc.createElement(b.t);
        for (const item of b.items) {
          const li = doc.createElement('li');
          inl(li, item);
          el.appendChild(li);
        }
        break;
      case 'pre': {
        el = doc.createElement('pre');
        const code = doc.createElement('code');
        code.textContent = b.v;
        el.appendChild(code);
        break;
      }
      case 'quote':
        el = doc.createElement('blockquote');
        inl(el, b.c);
        break;
    }
    frag.appendChild(el);
  }
  return frag;
}
