// Fitting one line of text to a width where CSS cannot: a list box's
// options are plain text, so a row that is too long is cut at its end,
// whatever is there (the time, a count). fitRow gives way on the head (a
// title, ellipsized) and keeps the tail whole.

/**
 * The longest row of head (cut, with an ellipsis, when it must be) and
 * the whole tail that measures no more than width. When even the tail
 * alone does not fit, the row is the tail: the head is in the tooltip.
 * @param {string} head @param {string} tail @param {number} width
 * @param {(text: string) => number} measure the text's width, in the units of width
 * @returns {string}
 */
export function fitRow(head, tail, width, measure) {
  const whole = head + tail;
  if (measure(whole) <= width) return whole;
  const chars = [...head]; // by code point: never half an emoji
  let lo = 0;
  let hi = chars.length - 1;
  // The most characters of head whose cut row fits (lo = 0: none).
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (measure(cut(chars, mid) + tail) <= width) lo = mid;
    else hi = mid - 1;
  }
  return lo > 0 ? cut(chars, lo) + tail : '…' + tail;
}

/** @param {string[]} chars @param {number} n */
function cut(chars, n) {
  return chars.slice(0, n).join('').trimEnd() + '…';
}

/**
 * Measures text as it is drawn in el (its font), in CSS pixels.
 * @param {Element} el @returns {(text: string) => number}
 */
export function measurer(el) {
  const cs = getComputedStyle(el);
  const ctx = /** @type {CanvasRenderingContext2D} */ (document.createElement('canvas').getContext('2d'));
  // The shorthand's parts: a computed font shorthand may be empty.
  ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
  return (text) => ctx.measureText(text).width;
}
