package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"pgregory.net/rapid"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// TestPolicyDecidesTheSameThroughEveryDoor: random principals, resources
// and requests are decided the same by the HTTP route, by the MCP tool
// call, and by `studio policy explain`'s code path (POST
// /api/admin/policy/explain), under the built-in policies, four-eyes and
// a team's file.
func TestPolicyDecidesTheSameThroughEveryDoor(t *testing.T) {
	t.Parallel()
	team, err := os.ReadFile("../../docs/examples/team-policy.cedar")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{script: &deleteScheduleScript, principals: true, serveApp: true, mcp: true,
		secondApprover: []string{"destructive"}, policies: []policy.File{{Name: "team.cedar", Text: team}}})
	h.nightly()
	if _, err := h.client.CreatePlaybook(h.ctx(), studio.CreatePlaybookCommand{Name: "prod-audit", Project: "prod", Prompt: "Audit {{input}}"}); err != nil {
		t.Fatal(err)
	}
	// Principals of every role; the first two also own conversations.
	type actor struct {
		name  string
		role  protocol.Role
		token string
	}
	var actors []actor
	for _, role := range protocol.Roles {
		for _, n := range []string{"a", "b"} {
			name := n + "-" + string(role)
			actors = append(actors, actor{name, role, h.principalToken(name, protocol.RoleOperator)})
		}
	}
	// Conversations of a-… and b-… principals, team and private, each
	// with a pending proposal (a delete, a vacuum).
	type convRef struct{ conv, proposal string }
	var convs []convRef
	for _, a := range actors[:4] {
		c := h.as(a.token)
		for _, vis := range []string{protocol.VisibilityTeam, protocol.VisibilityPrivate} {
			for _, instruction := range []string{"delete the nightly schedule", "vacuum"} {
				conv, err := c.CreateConversation(h.ctx(), protocol.CreateConversationRequest{Visibility: ptr(vis)})
				if err != nil {
					t.Fatal(err)
				}
				convs = append(convs, convRef{conv.ID, h.proposedBy(c, conv.ID, instruction).ID})
			}
		}
	}
	for _, a := range actors {
		if _, err := h.client.SetPrincipalRole(h.ctx(), a.name, a.role); err != nil {
			t.Fatal(err)
		}
	}

	explain := func(t *rapid.T, req policy.ExplainRequest) policy.Decision {
		x, err := h.client.ExplainPolicy(h.ctx(), req)
		if err != nil {
			t.Fatalf("explain %+v: %v", req, err)
		}
		return x.Decision
	}
	// door answers a request as the policy sees it: allowed, hidden or
	// denied with a reason.
	door := func(t *rapid.T, token, method, path string, body any, hidden string) string {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(h.ctx(), method, h.srv.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var eb protocol.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
			switch {
			case resp.StatusCode == http.StatusForbidden:
				return "denied:" + eb.Error.Details["reason"].(string)
			case resp.StatusCode == http.StatusNotFound && hidden != "" && strings.Contains(eb.Error.Message, hidden+" not found"):
				return "hidden"
			}
		}
		return "allowed"
	}
	verdict := func(d policy.Decision) string {
		switch d.Effect {
		case policy.EffectAllow:
			return "allowed"
		case policy.EffectObligation:
			return "allowed" // sent for approval, or refused by the command's own checks
		}
		return "denied:" + d.Reason
	}
	commands := []struct{ typ, body string }{
		{"delete_schedule", `{"schedule":"nightly","expectedVersion":999}`},
		{"set_schedule_enabled", `{"schedule":"nightly","enabled":true,"expectedVersion":999}`},
		{"launch_playbook", `{"playbook":"prod-audit","input":"x"}`},
		{"update_playbook", `{"playbook":"prod-audit","expectedVersion":999,"prompt":"y"}`},
		{"delete_playbook", `{"playbook":"prod-audit","expectedVersion":999}`},
		{"run_maintenance", `{"action":"integrity_check"}`},
		{"run_maintenance", `{"action":"purge_deleted_conversations"}`},
	}
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.SampledFrom(actors).Draw(t, "principal")
		switch rapid.IntRange(0, 3).Draw(t, "door") {
		case 0: // a conversation route
			c := rapid.SampledFrom(convs).Draw(t, "conversation")
			route := rapid.SampledFrom([]struct {
				action       policy.Action
				method, path string
			}{
				{policy.ReadConversation, "GET", "/api/operator/conversations/" + c.conv},
				{policy.Converse, "POST", "/api/operator/conversations/" + c.conv + "/turns"},
				{policy.UpdateConversation, "PATCH", "/api/operator/conversations/" + c.conv},
				{policy.RestoreConversation, "POST", "/api/operator/conversations/" + c.conv + "/restore"},
				{policy.AcknowledgeEffect, "POST", "/api/operator/conversations/" + c.conv + "/effects/" + c.proposal + "/ack"},
			}).Draw(t, "route")
			want := "hidden"
			if explain(t, policy.ExplainRequest{Principal: a.name, Action: policy.ReadConversation, Conversation: c.conv}).Allowed() {
				want = verdict(explain(t, policy.ExplainRequest{Principal: a.name, Action: route.action, Conversation: c.conv}))
			}
			var body any
			if route.method != "GET" {
				body = map[string]any{"__property": 1}
			}
			if got := door(t, a.token, route.method, route.path, body, c.conv); got != want {
				t.Fatalf("%s %s as %s: the door answered %s, explain decides %s", route.method, route.path, a.name, got, want)
			}
		case 1: // a proposal decision
			c := rapid.SampledFrom(convs).Draw(t, "conversation")
			action := rapid.SampledFrom([]policy.Action{policy.Confirm, policy.Deny, policy.Amend}).Draw(t, "action")
			want := "hidden"
			if explain(t, policy.ExplainRequest{Principal: a.name, Action: policy.ReadConversation, Conversation: c.conv}).Allowed() &&
				explain(t, policy.ExplainRequest{Principal: a.name, Action: policy.ReadProposal, Proposal: c.proposal}).Allowed() {
				want = verdict(explain(t, policy.ExplainRequest{Principal: a.name, Action: action, Proposal: c.proposal}))
			}
			path := "/api/operator/conversations/" + c.conv + "/proposals/" + c.proposal + "/" + string(action)
			if got := door(t, a.token, "POST", path, map[string]any{"__property": 1}, c.conv); got != want {
				t.Fatalf("%s as %s: the door answered %s, explain decides %s", path, a.name, got, want)
			}
		case 2: // a direct command
			cmd := rapid.SampledFrom(commands).Draw(t, "command")
			want := verdict(explain(t, policy.ExplainRequest{Principal: a.name, Action: policy.RunCommand,
				Command: &policy.ExplainCommand{Type: cmd.typ, Body: jsontext.Value(cmd.body)}}))
			if got := door(t, a.token, "POST", "/api/app/commands/"+cmd.typ, jsontext.Value(cmd.body), ""); got != want {
				t.Fatalf("%s as %s: the door answered %s, explain decides %s", cmd.typ, a.name, got, want)
			}
		case 3: // an MCP tool call, and the same action through HTTP
			cmd := rapid.SampledFrom(commands).Draw(t, "command")
			want := verdict(explain(t, policy.ExplainRequest{Principal: a.name, Action: policy.Propose, Door: policy.DoorMCP,
				Command: &policy.ExplainCommand{Type: cmd.typ, Body: jsontext.Value(cmd.body)}}))
			if got := mcpCall(t, h.srv.URL, a.token, cmd.typ); got != want {
				t.Fatalf("MCP %s as %s: the door answered %s, explain decides %s", cmd.typ, a.name, got, want)
			}
			read := verdict(explain(t, policy.ExplainRequest{Principal: a.name, Action: policy.ReadHealth, Door: policy.DoorMCP}))
			if got := mcpCall(t, h.srv.URL, a.token, "system_health"); got != read {
				t.Fatalf("MCP system_health as %s: %s, explain decides %s", a.name, got, read)
			}
			if got := door(t, a.token, "GET", "/api/app/system/health", nil, ""); got != read {
				t.Fatalf("GET health as %s: %s, explain decides %s", a.name, got, read)
			}
		}
	})
}

// mcpCall calls a tool (its arguments refused once the call is allowed)
// and answers as the policy sees it.
func mcpCall(t *rapid.T, base, token, tool string) string {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"__property":1},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"` + testutil.MCPVersion + `","io.modelcontextprotocol/clientCapabilities":{}}}}`
	if tool == "system_health" {
		body = strings.Replace(body, `{"__property":1}`, `{}`, 1)
	}
	status, b := testutil.MCPPost(t, t.Context(), testutil.MCPCall{URL: base, Token: token, Body: body, Method: "tools/call", Name: tool})
	pe := testutil.MCPToolError(b)
	if status == http.StatusForbidden {
		var eb protocol.ErrorBody
		if err := json.Unmarshal(b, &eb); err != nil {
			t.Fatalf("MCP %s: %d %s", tool, status, b)
		}
		pe = eb.Error
	}
	if pe != nil && pe.Code == protocol.Denied {
		return "denied:" + pe.Details["reason"].(string)
	}
	return "allowed"
}
