// An outside MCP client, the official TypeScript SDK, against a running
// Studio daemon: over Streamable HTTP (STUDIO_URL + /mcp with STUDIO_TOKEN)
// and, when STUDIO_BIN is set, over stdio through `studio mcp`. Each lists
// the tools, calls a read tool and a command tool (which must answer a
// pending proposal), and prints one JSON line; any failure exits 1.
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

async function exercise(name, transport) {
  const client = new Client({ name: 'studio-ts-check', version: '1.0.0' });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    if (byName.list_runs?.annotations?.readOnlyHint !== true || byName.list_runs?.annotations?.openWorldHint !== false) {
      fail(`${name}: list_runs annotations ${JSON.stringify(byName.list_runs?.annotations)}`);
    }
    if (byName.delete_schedule?.annotations?.destructiveHint !== true) {
      fail(`${name}: delete_schedule annotations ${JSON.stringify(byName.delete_schedule?.annotations)}`);
    }
    if (byName.navigate) fail(`${name}: the cockpit's navigate tool is offered`);
    const read = await client.callTool({ name: 'list_schedules', arguments: {} });
    if (read.isError || !JSON.stringify(read.structuredContent).includes('nightly-audit')) {
      fail(`${name}: list_schedules ${JSON.stringify(read)}`);
    }
    const cmd = await client.callTool({ name: 'set_schedule_enabled', arguments: { schedule: 'nightly-audit', enabled: true } });
    const p = cmd.structuredContent;
    if (cmd.isError || p?.status !== 'pending' || !p.proposalId || !p.commandHash || !p.cockpitUrl) {
      fail(`${name}: set_schedule_enabled ${JSON.stringify(cmd)}`);
    }
    const got = await client.callTool({ name: 'get_proposal', arguments: { proposalId: p.proposalId } });
    if (got.structuredContent?.status !== 'pending') fail(`${name}: get_proposal ${JSON.stringify(got)}`);
    const line = {
      transport: name,
      protocolVersion: transport.protocolVersion ?? null,
      server: client.getServerVersion()?.name,
      tools: tools.length,
      proposalId: p.proposalId,
      existing: Boolean(p.existing),
    };
    console.log(JSON.stringify(line));
  } finally {
    await client.close();
  }
}

try {
  await exercise('http', new StreamableHTTPClientTransport(new URL('/mcp', url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }));
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
