// The official AG-UI client (@ag-ui/client's HttpAgent) against a running
// studio daemon's POST /api/agui, every event it receives validated by
// @ag-ui/core's schemas: a read question streamed; a frontend tool (the
// cockpit's navigate) applied and acknowledged; a proposal's interrupt
// resumed with confirm, and another with deny; a reconnect mid-run after
// the last event id. Prints one JSON line; cmd/studio's
// TestProcessAGUIClient checks it against the daemon.
//
// Env: STUDIO_URL, STUDIO_TOKEN (an operator's token).
import { HttpAgent, buildResumeArray, randomUUID } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const url = process.env.STUDIO_URL + "/api/agui";
const token = process.env.STUDIO_TOKEN;
const schemaErrors = [];
let events = 0;

// validating checks every event against the protocol's schema.
const validating = {
  onEvent({ event }) {
    events++;
    const r = EventSchemas.safeParse(event);
    if (!r.success) schemaErrors.push({ type: event.type, issues: r.error.issues.slice(0, 3) });
  },
};

function agent(extra = {}) {
  const a = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` }, threadId: randomUUID(), ...extra });
  a.subscribe(validating);
  return a;
}

function say(a, text) {
  a.addMessage({ id: randomUUID(), role: "user", content: text });
}

function assistantText(a) {
  return a.messages.filter((m) => m.role === "assistant" && typeof m.content === "string").map((m) => m.content).join("");
}

function fail(what, detail) {
  console.log(JSON.stringify({ failed: what, detail, schemaErrors }));
  process.exit(1);
}

async function proposalStatus(id) {
  const r = await fetch(`${process.env.STUDIO_URL}/api/operator/proposals/${id}`, { headers: { Authorization: `Bearer ${token}` } });
  return (await r.json()).status;
}

const out = {};

// A read question, streamed.
{
  const a = agent();
  say(a, "hello, what does audit-repo do?");
  const types = [];
  await a.runAgent({}, { onEvent: ({ event }) => types.push(event.type) });
  out.read = { text: assistantText(a), types };
}

// A frontend tool: the effect is a tool call the client runs; its result
// acknowledges it (applied, with the route it shows).
{
  const a = agent();
  const tools = [{ name: "navigate", description: "Open a space of the Studio cockpit", parameters: { type: "object" } }];
  say(a, "go fleet: show the failed runs");
  let call;
  await a.runAgent({ tools }, { onToolCallEndEvent: ({ toolCallName, toolCallArgs, event }) => { call = { id: event.toolCallId, name: toolCallName, args: toolCallArgs }; } });
  if (!call || call.name !== "navigate") fail("frontend tool call", a.messages);
  a.addMessage({ id: randomUUID(), role: "tool", toolCallId: call.id, content: JSON.stringify({ status: "applied", clientRoute: "/?view=fleet&status=failed" }) });
  const { result } = await a.runAgent({ tools });
  out.frontend = { effectId: call.id, args: call.args, acknowledged: result?.acknowledged ?? null };
}

// A proposal is an interrupt; the next run's resume confirms it.
async function interrupted() {
  const a = agent();
  say(a, "launch audit-repo on repo x");
  await a.runAgent();
  if (a.pendingInterrupts.length !== 1) fail("interrupt", a.pendingInterrupts);
  return a;
}
{
  const a = await interrupted();
  const it = a.pendingInterrupts[0];
  const resume = buildResumeArray(a.pendingInterrupts, { [it.id]: { status: "resolved", payload: { decision: "confirm" } } });
  await a.runAgent({ resume });
  out.confirm = { interrupt: it, pendingAfter: a.pendingInterrupts.length, status: await proposalStatus(it.id), text: assistantText(a) };
}
{
  const a = await interrupted();
  const it = a.pendingInterrupts[0];
  const resume = buildResumeArray(a.pendingInterrupts, { [it.id]: { status: "resolved", payload: { decision: "deny" } } });
  await a.runAgent({ resume });
  out.deny = { interrupt: it.id, pendingAfter: a.pendingInterrupts.length, status: await proposalStatus(it.id) };
}

// A reconnect mid-run: the client leaves after the first text, then sends
// the run again with its id and the last event id it read.
{
  const seen = []; // [id or null, event type] in the order the daemon sent them
  const tee = async (u, init) => {
    const res = await fetch(u, init);
    const [mine, theirs] = res.body.tee();
    (async () => {
      const dec = new TextDecoder();
      let buf = "", id = null;
      try {
        for await (const chunk of mine) {
          buf += dec.decode(chunk, { stream: true });
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            id = null;
            let data = null;
            for (const line of block.split("\n")) {
              if (line.startsWith("id: ")) id = line.slice(4);
              if (line.startsWith("data: ")) data = JSON.parse(line.slice(6));
            }
            if (data) seen.push([id, data.type]);
          }
        }
      } catch {}
    })();
    return new Response(theirs, { status: res.status, headers: res.headers });
  };
  const a = agent({ fetch: tee });
  say(a, "slow answer please");
  const runId = randomUUID();
  let processed = 0;
  await a.runAgent({ runId }, {
    onEvent: () => { processed++; },
    onTextMessageContentEvent: () => { a.abortRun(); },
  });
  let lastId = null;
  for (const [id] of seen.slice(0, processed)) if (id) lastId = id;
  if (!lastId) fail("no event id before the abort", seen);
  const partial = assistantText(a);
  a.headers["Last-Event-ID"] = lastId;
  const types = [];
  await a.runAgent({ runId }, { onEvent: ({ event }) => types.push(event.type) });
  out.reconnect = { partial, lastId, text: assistantText(a), types };
}

out.events = events;
out.schemaErrors = schemaErrors;
console.log(JSON.stringify(out));
