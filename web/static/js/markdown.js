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
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  /** @type {Block[]} */
  const out = [];
  /** @type {string[]} */
  let para = [];
  const flush = () => {
    if (para.length) out.push({ t: 'p', c: inline(para.join('\n')) });
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+-]*)\s*$/);
    if (fence) {
      flush();
      const code = [];
      i++;
      while (i < lines.length && !/^\s*```\s*$/.test(lines[i])) code.push(lines[i++]);
      out.push({ t: 'pre', v: code.join('\n'), lang: fence[1] || '' });
      continue;
    }
    const head = line.match(/^(#{1,6})\s+(.*)$/);
    if (head) {
      flush();
      out.push({ t: 'h', level: Math.min(head[1].length, 3), c: inline(head[2].trim()) });
      continue;
    }
    const ul = line.match(/^\s*[-*+]\s+(.*)$/);
    const ol = line.match(/^\s*\d{1,9}[.)]\s+(.*)$/);
    if (ul || ol) {
      flush();
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
      out.push({ t: kind, items });
      continue;
    }
    const q = line.match(/^\s*>\s?(.*)$/);
    if (q) {
      flush();
      const body = [q[1]];
      while (i + 1 < lines.length && /^\s*>/.test(lines[i + 1])) body.push(lines[++i].replace(/^\s*>\s?/, ''));
      out.push({ t: 'quote', c: inline(body.join('\n')) });
      continue;
    }
    if (line.trim() === '') {
      flush();
      continue;
    }
    para.push(line);
  }
  flush();
  return out;
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
