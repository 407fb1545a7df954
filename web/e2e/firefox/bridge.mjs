// The cockpit's Firefox tests drive Debian's firefox-esr through this
// bridge: puppeteer-core speaks WebDriver BiDi to the browser (Firefox has
// no CDP, so chromedp cannot drive it), and the Go test (web/e2e's
// TestFirefoxCockpit) speaks JSON lines to the bridge, one request per line
// on stdin, one answer per line on stdout:
//
//   {"id": 1, "op": "open", "url": "..."}            -> {"id": 1, "value": "p1"}
//   {"id": 2, "op": "eval", "page": "p1", "js": "..."} -> {"id": 2, "value": ...}
//   {"id": 3, ...}                                     -> {"id": 3, "error": "..."}
//
// One browser for the whole run, started at once: the first line the
// bridge writes is {"ready": true, "value": "<version>"} or {"error": ...}.
// Each opened page is a fresh browser context (its own storage), kept
// until stdin closes, which closes the browser.
import { createInterface } from 'node:readline';
import puppeteer from 'puppeteer-core';

const firefox = process.env.FIREFOX || '/usr/bin/firefox-esr';

/** @type {import('puppeteer-core').Browser | undefined} */
let browser;
/** @type {Map<string, {page: import('puppeteer-core').Page, errors: string[]}>} */
const pages = new Map();
let nextPage = 1;

async function start() {
  browser ??= await puppeteer.launch({
    browser: 'firefox',
    executablePath: firefox,
    headless: true, // puppeteer gives it a temporary profile, removed on close
  });
  return browser;
}

/** @param {string} id */
function get(id) {
  const p = pages.get(id);
  if (!p) throw new Error(`no page ${id}`);
  return p;
}

/** @type {Record<string, (req: any) => Promise<any>>} */
const ops = {
  // open: a tab in a new browser context, its console errors and uncaught
  // exceptions collected, at the address given.
  async open(req) {
    const b = await start();
    const ctx = await b.createBrowserContext();
    const page = await ctx.newPage();
    const entry = { page, errors: /** @type {string[]} */ ([]) };
    page.on('console', (m) => { if (m.type() === 'error') entry.errors.push(`console.error: ${m.text()}`); });
    page.on('pageerror', (e) => entry.errors.push(`uncaught: ${e instanceof Error ? e.message : String(e)}`));
    page.on('dialog', (d) => { entry.errors.push(`a ${d.type()} dialog: ${d.message()}`); d.dismiss().catch(() => {}); });
    await page.setViewport({ width: req.width || 1440, height: req.height || 900 });
    await page.goto(req.url, { waitUntil: 'load' });
    const id = `p${nextPage++}`;
    pages.set(id, entry);
    return id;
  },
  // eval: a JavaScript expression in the page, a promise awaited; the
  // value comes back as JSON.
  async eval(req) {
    return get(req.page).page.evaluate(req.js);
  },
  // wait: polls a JavaScript predicate in the page until it is truthy
  // (an error when the time is up or the page went away meanwhile).
  async wait(req) {
    await get(req.page).page.waitForFunction(req.js, { polling: req.pollMs || 40, timeout: req.timeoutMs || 10000 });
    return true;
  },
  async viewport(req) {
    await get(req.page).page.setViewport({ width: req.width, height: req.height });
    return true;
  },
  // click: the element scrolled into view and clicked with the mouse.
  async click(req) {
    await get(req.page).page.locator(req.selector).setTimeout(req.timeoutMs || 10000).click();
    return true;
  },
  // type: keys typed into a field as a person types them.
  async type(req) {
    const { page } = get(req.page);
    await page.focus(req.selector);
    await page.keyboard.type(req.text);
    return true;
  },
  async key(req) {
    await get(req.page).page.keyboard.press(req.key);
    return true;
  },
  async shot(req) {
    await get(req.page).page.screenshot({ path: req.path });
    return true;
  },
  // errors: the console errors and uncaught exceptions since the last ask.
  async errors(req) {
    const p = get(req.page);
    return p.errors.splice(0);
  },
};

/** @param {any} msg */
function answer(msg) { process.stdout.write(JSON.stringify(msg) + '\n'); }

async function close() {
  try { await browser?.close(); } catch { /* already gone */ }
}

const lines = createInterface({ input: process.stdin });
let queue = Promise.resolve();
lines.on('line', (line) => {
  // One request at a time, in order: the Go side waits for each answer.
  queue = queue.then(async () => {
    let req;
    try {
      req = JSON.parse(line);
      const op = ops[req.op];
      if (!op) throw new Error(`unknown op ${req.op}`);
      const value = await op(req);
      answer({ id: req.id, value: value === undefined ? null : value });
    } catch (e) {
      answer({ id: req?.id, error: e instanceof Error ? e.message : String(e) });
    }
  });
});
lines.on('close', () => { queue.then(close).then(() => process.exit(0)); });
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => { close().then(() => process.exit(1)); });
queue = start().then(async (b) => answer({ ready: true, value: await b.version() }),
  (e) => { answer({ error: `Firefox at ${firefox} did not start: ${e instanceof Error ? e.message : e}` }); process.exit(1); });
