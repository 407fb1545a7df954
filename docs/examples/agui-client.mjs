// A terminal chat with Studio's operator over AG-UI (docs/agui.md), with
// the official client, @ag-ui/client's HttpAgent: the answer streams as
// it comes; a proposal is an interrupt, confirmed or denied at a prompt.
//
//   cd checks/agui-client-check && npm ci
//   STUDIO_URL=http://127.0.0.1:8765 STUDIO_TOKEN=stu_… node ../../docs/examples/agui-client.mjs
import { createRequire } from "node:module";
import { createInterface } from "node:readline/promises";
import { stdin, stdout } from "node:process";

// @ag-ui/client is installed in checks/agui-client-check.
const require = createRequire(new URL("../../checks/agui-client-check/package.json", import.meta.url));
const { HttpAgent, buildResumeArray, randomUUID } = require("@ag-ui/client");

const agent = new HttpAgent({
  url: `${process.env.STUDIO_URL ?? "http://127.0.0.1:8765"}/api/agui`,
  headers: { Authorization: `Bearer ${process.env.STUDIO_TOKEN}` },
});
const show = {
  onTextMessageContentEvent: ({ event }) => { stdout.write(event.delta); },
  onTextMessageEndEvent: () => { stdout.write("\n"); },
  onToolCallStartEvent: ({ event }) => { stdout.write(`  [${event.toolCallName}]\n`); },
  onRunErrorEvent: ({ event }) => { stdout.write(`  error ${event.code}: ${event.message}\n`); },
};
const rl = createInterface({ input: stdin, output: stdout });

for (;;) {
  const line = await rl.question("> ");
  if (line.trim() === "") break;
  agent.addMessage({ id: randomUUID(), role: "user", content: line });
  try {
    await agent.runAgent({}, show);
    // Each open interrupt is a proposal: show it, ask, answer in the next run.
    while (agent.pendingInterrupts.length > 0) {
      const answers = {};
      for (const it of agent.pendingInterrupts) {
        const m = it.metadata ?? {};
        stdout.write(`\nProposal: ${it.message}\n  risk ${m.risk}${m.impact ? ", " + m.impact : ""}, expires ${it.expiresAt}\n  ${m.cockpitUrl ?? ""}\n`);
        const yes = (await rl.question("Confirm? [y/N] ")).trim().toLowerCase() === "y";
        answers[it.id] = { status: "resolved", payload: { decision: yes ? "confirm" : "deny" } };
      }
      await agent.runAgent({ resume: buildResumeArray(agent.pendingInterrupts, answers) }, show);
    }
  } catch (err) {
    // A refusal before the run (a denial, an expired interrupt) is the
    // API's typed error.
    stdout.write(`  ${err.message}\n`);
    agent.pendingInterrupts = [];
  }
}
rl.close();
