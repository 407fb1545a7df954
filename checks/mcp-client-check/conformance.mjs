// The official MCP conformance suite's server scenarios against a running
// Studio daemon. The suite sends no credentials, so a loopback proxy in
// front of the daemon adds STUDIO_TOKEN's Authorization header to every
// request (and changes nothing else: Host and Origin pass as sent, so the
// DNS-rebinding scenario meets the daemon's own checks). Each scenario's
// result is printed as one JSON line {scenario, passed, failed, checks};
// the exit status is the suite's.
import http from 'node:http';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const url = process.env.STUDIO_URL;
const token = process.env.STUDIO_TOKEN;
if (!url || !token) {
  console.error('set STUDIO_URL and STUDIO_TOKEN (an agent principal\'s)');
  process.exit(2);
}
// Scenarios that need only what every MCP server has: the reference
// fixtures (test_simple_text, resources, prompts, logging) are not Studio's.
const scenarios = (process.env.SCENARIOS ?? 'server-initialize,ping,tools-list,dns-rebinding-protection').split(',');
const upstream = new URL(url);

const proxy = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const up = http.request({ hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers }, (r) => {
    res.writeHead(r.statusCode, r.headers);
    r.pipe(res);
  });
  up.on('error', (err) => { res.writeHead(502); res.end(String(err)); });
  req.pipe(up);
});
await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const target = `http://127.0.0.1:${proxy.address().port}/mcp`;
const bin = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules', '.bin', 'conformance');

let failed = 0;
for (const scenario of scenarios) {
  const out = await new Promise((resolve) => {
    const p = spawn(process.execPath, [bin, 'server', '--url', target, '--scenario', scenario, '--verbose'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    p.stdout.on('data', (d) => { text += d; });
    p.stderr.on('data', (d) => { text += d; });
    p.on('close', (code) => resolve({ code, text }));
  });
  const statuses = [...out.text.matchAll(/"status":\s*"(SUCCESS|FAILURE|WARNING|INFO)"/g)].map((m) => m[1]);
  const ok = statuses.filter((s) => s === 'SUCCESS').length;
  const bad = statuses.filter((s) => s === 'FAILURE').length;
  const line = { scenario, exit: out.code, passed: ok, failed: bad, warnings: statuses.filter((s) => s === 'WARNING').length };
  if (out.code !== 0 || bad > 0 || ok === 0) {
    failed++;
    line.output = out.text.slice(-4000);
  }
  console.log(JSON.stringify(line));
}
proxy.close();
process.exit(failed > 0 ? 1 : 0);
