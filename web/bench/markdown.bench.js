// How long the dock spends on Markdown while a long answer streams: a full
// parse of the bubble per delta (the old way) against MarkdownStream.
// Run: node web/bench/markdown.bench.js  (a measurement, not a test)
import { parse, MarkdownStream } from '../static/js/markdown.js';

const para = 'The run of **audit-repo** on `acme/api` failed because the model provider answered 429; see [the fleet](/?view=fleet).';
const blocks = [];
for (let i = 0; i < 400; i++) {
  blocks.push(i % 10 === 9 ? '```\nlet x = ' + i + ';\n```' : i % 5 === 4 ? `- item ${i}\n- item ${i + 1}` : `${para} (${i})`);
}
const text = blocks.join('\n\n');
const deltas = [];
for (let i = 0; i < text.length; i += 24) deltas.push(text.slice(i, i + 24));

function time(name, fn) {
  fn(); // warm up
  const runs = 3;
  const t0 = performance.now();
  for (let i = 0; i < runs; i++) fn();
  const ms = (performance.now() - t0) / runs;
  console.log(`${name}: ${ms.toFixed(1)} ms for ${deltas.length} deltas (${(text.length / 1024).toFixed(0)} KiB answer)`);
}

time('full parse per delta', () => {
  let sofar = '';
  for (const d of deltas) {
    sofar += d;
    parse(sofar);
  }
});
time('MarkdownStream', () => {
  const s = new MarkdownStream();
  for (const d of deltas) s.append(d);
});
