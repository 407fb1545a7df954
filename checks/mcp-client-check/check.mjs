// An outside MCP client, the official TypeScript SDK, against a running
// Studio daemon: over Streamable HTTP (STUDIO_URL + /mcp with STUDIO_TOKEN)
// and, when STUDIO_BIN is set, over stdio through `studio mcp`. Each
// connects with no error event (the SDK's optional GET stream must end
// quietly on the daemon's 405), lists the tools, calls a read tool and a
// command tool (which must answer a pending proposal, and the same call
// again the same proposal), follows it with get_proposal, and sends bad
// arguments (an isError result with a typed error, not a thrown one). With
// MCP_CHECK_VIEWER_TOKEN, a viewer's tool list must hold no command tool.
// Prints one JSON line per transport; any failure exits 1.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const url = process.env.STUDIO_URL;
const token = process.env.STUDIO_TOKEN;
if (!url || !token) {
  console.error('set STUDIO_URL and STUDIO_TOKEN (an agent principal\'s)');
  process.exit(2);
}

function fail(msg) {
  throw new Error(msg);
}

function http(tok) {
  return new StreamableHTTPClientTransport(new URL('/mcp', url), {
    requestInit: { headers: { Authorization: `Bearer ${tok}` } },
  });
}

async function connect(name, transport) {
  const client = new Client({ name: 'studio-ts-check', version: '1.0.0' });
  const errors = [];
  client.onerror = (err) => errors.push(String(err?.message ?? err));
  await client.connect(transport);
  return { client, errors };
}

async function exercise(name, transport) {
  const { client, errors } = await connect(name, transport);
  try {
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    if (byName.list_runs?.annotations?.readOnlyHint !== true || byName.list_runs?.annotations?.openWorldHint !== false) {
      fail(`${name}: list_runs annotations ${JSON.stringify(byName.list_runs?.annotations)}`);
    }
    if (byName.delete_schedule?.annotations?.destructiveHint !== true) {
      fail(`${name}: delete_schedule annotations ${JSON.stringify(byName.delete_schedule?.annotations)}`);
    }
    if (byName.launch_playbook?.annotations?.openWorldHint !== true) {
      fail(`${name}: launch_playbook annotations ${JSON.stringify(byName.launch_playbook?.annotations)}`);
    }
    if (!byName.set_schedule_enabled?.description?.includes("Needs a human's confirmation")) {
      fail(`${name}: set_schedule_enabled description ${byName.set_schedule_enabled?.description}`);
    }
    if (byName.navigate) fail(`${name}: the cockpit's navigate tool is offered`);
    const read = await client.callTool({ name: 'list_schedules', arguments: {} });
    if (read.isError || !JSON.stringify(read.structuredContent).includes('nightly-audit')) {
      fail(`${name}: list_schedules ${JSON.stringify(read)}`);
    }
    const args = { schedule: 'nightly-audit', enabled: true };
    const cmd = await client.callTool({ name: 'set_schedule_enabled', arguments: args });
    const p = cmd.structuredContent;
    if (cmd.isError || p?.status !== 'pending' || !p.proposalId || !p.commandHash || !p.cockpitUrl) {
      fail(`${name}: set_schedule_enabled ${JSON.stringify(cmd)}`);
    }
    const again = await client.callTool({ name: 'set_schedule_enabled', arguments: args });
    if (again.structuredContent?.proposalId !== p.proposalId || again.structuredContent?.existing !== true) {
      fail(`${name}: the same call again ${JSON.stringify(again)}`);
    }
    const got = await client.callTool({ name: 'get_proposal', arguments: { proposalId: p.proposalId } });
    if (got.structuredContent?.status !== 'pending') fail(`${name}: get_proposal ${JSON.stringify(got)}`);
    const bad = await client.callTool({ name: 'get_proposal', arguments: { proposalId: 5 } });
    const e = bad.structuredContent?.error;
    if (!bad.isError || e?.code !== 'validation' || typeof e?.retryable !== 'boolean' || /Go |struct/.test(e?.message ?? '')) {
      fail(`${name}: bad arguments ${JSON.stringify(bad)}`);
    }
    let viewerTools = null;
    if (name === 'http' && process.env.MCP_CHECK_VIEWER_TOKEN) {
      const v = await connect('viewer', http(process.env.MCP_CHECK_VIEWER_TOKEN));
      const listed = (await v.client.listTools()).tools;
      await v.client.close();
      errors.push(...v.errors);
      if (listed.some((t) => !t.annotations?.readOnlyHint)) {
        fail(`viewer: tools/list offers ${listed.filter((t) => !t.annotations?.readOnlyHint).map((t) => t.name)}`);
      }
      viewerTools = listed.length;
    }
    if (errors.length > 0) fail(`${name}: error events ${JSON.stringify(errors)}`);
    console.log(JSON.stringify({
      transport: name,
      protocolVersion: transport.protocolVersion ?? null,
      server: client.getServerVersion()?.name,
      tools: tools.length,
      viewerTools,
      proposalId: p.proposalId,
      existing: again.structuredContent.existing,
      errorEvents: errors.length,
    }));
  } finally {
    await client.close();
  }
}

try {
  await exercise('http', http(token));
  if (process.env.STUDIO_BIN) {
    await exercise('stdio', new StdioClientTransport({
      command: process.env.STUDIO_BIN,
      args: ['mcp'],
      env: { ...process.env, STUDIO_URL: url, STUDIO_TOKEN: token },
      stderr: 'inherit',
    }));
  }
} catch (err) {
  console.error(String(err?.stack ?? err));
  process.exit(1);
}
