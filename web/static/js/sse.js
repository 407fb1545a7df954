// The Server-Sent Events wire format (WHATWG event-stream rules), parsed
// incrementally: what the stream hands it may split anywhere.

/**
 * @typedef {{id?: string, data: string, event?: string}} SSEEvent
 * @typedef {{onEvent: (ev: SSEEvent) => void, onComment?: (text: string) => void, onRetry?: (ms: number) => void}} SSEHandlers
 */

/**
 * An incremental Server-Sent Events parser (the WHATWG event-stream rules):
 * LF, CR or CRLF line ends, also split across chunks; comments; multi-line
 * data; id and retry fields. Feed it text with push().
 */
export class SSEParser {
  /** @param {SSEHandlers} handlers */
  constructor(handlers) {
    this.h = handlers;
    this.buf = '';
    this.skipLF = false; // the previous chunk ended in CR: a leading LF belongs to it
    /** @type {string[]} */
    this.data = [];
    this.id = undefined;
    this.event = undefined;
    this.lastEventId = '';
  }

  /** @param {string} chunk */
  push(chunk) {
    if (this.skipLF && chunk.startsWith('\n')) chunk = chunk.slice(1);
    this.skipLF = false;
    this.buf += chunk;
    let start = 0;
    for (;;) {
      const cr = this.buf.indexOf('\r', start);
      const lf = this.buf.indexOf('\n', start);
      if (cr < 0 && lf < 0) break;
      let end, next;
      if (cr >= 0 && (lf < 0 || cr < lf)) {
        end = cr;
        if (cr + 1 < this.buf.length) {
          next = this.buf[cr + 1] === '\n' ? cr + 2 : cr + 1;
        } else {
          next = cr + 1;
          this.skipLF = true; // CR at the end of the chunk: a following LF is part of it
        }
      } else {
        end = /** @type {number} */ (lf);
        next = end + 1;
      }
      this.line(this.buf.slice(start, end));
      start = next;
    }
    this.buf = this.buf.slice(start);
  }

  /** Ends the stream: an event without its blank line is not dispatched (per the spec). */
  end() {
    this.buf = '';
    this.data = [];
  }

  /** @param {string} line */
  line(line) {
    if (line === '') {
      if (this.data.length > 0) {
        const ev = { data: this.data.join('\n'), id: this.id, event: this.event };
        this.data = [];
        this.event = undefined;
        this.id = undefined;
        this.h.onEvent(ev);
      } else {
        this.event = undefined;
        this.id = undefined;
      }
      return;
    }
    if (line.startsWith(':')) {
      if (this.h.onComment) this.h.onComment(line.slice(1).trim());
      return;
    }
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'id':
        if (!value.includes('\0')) {
          this.id = value;
          this.lastEventId = value;
        }
        break;
      case 'event':
        this.event = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value) && this.h.onRetry) this.h.onRetry(Number(value));
        break;
    }
  }
}
