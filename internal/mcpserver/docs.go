package mcpserver

import (
	"fmt"
	"strings"

	"github.com/studio/operator/internal/policy"
)

// ToolsMarkdown is the tool list with annotations as docs/mcp-tools.md
// prints it (a test keeps the file fresh).
func (s *Server) ToolsMarkdown() string {
	e := policy.Default()
	var b strings.Builder
	b.WriteString("# MCP tools\n\n")
	b.WriteString("Generated from the operator's tool registry (`go test ./internal/mcpserver -run ToolsDoc -update`); ")
	b.WriteString("the same list `tools/list` answers on `/mcp` and through `studio mcp`. ")
	b.WriteString("Read tools run at once. A command tool never changes anything: it answers a pending proposal ")
	b.WriteString("(`status`, `proposalId`, `summary`, `risk`, `impact`, `target`, `expiresAt`, `commandHash`, `conversationId`, `cockpitUrl`) ")
	b.WriteString("that a human with the role for its risk confirms in the cockpit or with `studio operator confirm`; `get_proposal` follows it. ")
	b.WriteString("`tools/list` shows a caller the tools it may call. ")
	b.WriteString("Errors — a role or policy denial, the rate limit, invalid arguments, a conflict — are tool results with `isError` and ")
	b.WriteString("`{\"error\": {code, message, retryable, retryAfterMs?, details?}}` (docs/protocol.md), over HTTP and through `studio mcp` alike. See docs/mcp.md.\n\n")
	b.WriteString("| tool | title | least role | needs a human | readOnly | destructive | idempotent | openWorld |\n|---|---|---|---|---|---|---|---|\n")
	yn := func(v bool) string {
		if v {
			return "yes"
		}
		return "no"
	}
	for _, o := range s.Tools() {
		a := o.Tool.Annotations
		destructive := a.DestructiveHint != nil && *a.DestructiveHint
		open := a.OpenWorldHint == nil || *a.OpenWorldHint
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", o.Tool.Name, o.Tool.Title, policy.LeastRole(e, o.Action), yn(!a.ReadOnlyHint),
			yn(a.ReadOnlyHint), yn(destructive && !a.ReadOnlyHint), yn(a.IdempotentHint), yn(open))
	}
	fmt.Fprintf(&b, "\nEach call is decided by the policy (docs/teams.md), alone or in a batch: a command tool asks `propose`, which needs the `%s` role under the built-in policies; confirming asks `confirm` (%s), and four-eyes (`--second-approver-for`) treats the agent's principal as the author.\n",
		policy.LeastRole(e, policy.Propose), policy.LeastRole(e, policy.Confirm))
	return b.String()
}
