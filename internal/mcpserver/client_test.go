package mcpserver_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// connectAs is the SDK's client named name over Streamable HTTP, speaking
// protocol revision version ("" the latest).
func (d *daemon) connectAs(token, name, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	d.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: d.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: mcpserver.BearerTransport{Token: token, Next: d.srv.Client().Transport}}}
	s, err := c.Connect(d.ctx(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { s.Close() })
	return s
}

// secondToken is another token of an existing principal.
func (d *daemon) secondToken(name string) string {
	d.t.Helper()
	p, err := d.db.GetPrincipal(d.ctx(), name)
	if err != nil {
		d.t.Fatal(err)
	}
	token := httpapi.NewToken()
	if _, err := d.db.CreateToken(d.ctx(), store.CreateTokenParams{ID: uuid.NewString(), PrincipalID: p.ID,
		Hash: httpapi.HashToken(token), Prefix: httpapi.TokenDisplayPrefix(token), Now: d.clock.Now()}); err != nil {
		d.t.Fatal(err)
	}
	return token
}

// TestEachClientItsOwnConversation: two clients of one principal get two
// conversations, whatever their revision — so one's pending proposal
// never makes the other's unrelated call a conflict. Before 2026-07-28
// the name comes from initialize (the session id carries it); a
// 2026-07-28 request without clientInfo is told apart by its token.
func TestEachClientItsOwnConversation(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	cursor := d.connectAs(d.agent, "cursor", "2025-11-25", nil)
	vscode := d.connectAs(d.agent, "vscode", "2025-06-18", nil)
	res, a := call(t, cursor, "set_schedule_enabled", enable())
	if res.IsError {
		t.Fatalf("cursor: %v", a)
	}
	res, b := call(t, vscode, "delete_schedule", map[string]any{"schedule": "nightly-audit"})
	if res.IsError || b["status"] != "pending" {
		t.Fatalf("vscode's call while cursor's proposal waits: %v", b)
	}
	if a["conversationId"] == b["conversationId"] {
		t.Fatalf("two clients share conversation %v", a["conversationId"])
	}
	for conv, name := range map[string]string{a["conversationId"].(string): "cursor", b["conversationId"].(string): "vscode"} {
		page, err := d.api(d.operator).GetConversation(d.ctx(), conv, 0, 1)
		if err != nil || page.Conversation.Title == nil || !strings.HasPrefix(*page.Conversation.Title, name+" (agent claude)") {
			t.Errorf("conversation of %s: %+v %v", name, page.Conversation.Title, err)
		}
	}

	// 2026-07-28 without clientInfo: one conversation per token.
	other := d.secondToken("claude")
	convOf := func(token, tool, args string) string {
		t.Helper()
		resp, body := d.post(token, "", toolCall(tool, args))
		if resp.StatusCode != http.StatusOK || strings.Contains(body, `"isError":true`) {
			t.Fatalf("%s: %d %s", tool, resp.StatusCode, body)
		}
		i := strings.Index(body, `\"conversationId\":\"`)
		return body[i+len(`\"conversationId\":\"`):][:36]
	}
	c1 := convOf(d.agent, "set_schedule_enabled", `{"schedule":"nightly-audit","enabled":true}`)
	c2 := convOf(other, "delete_schedule", `{"schedule":"nightly-audit"}`)
	if c1 == c2 || c1 == a["conversationId"] || c2 == b["conversationId"] {
		t.Fatalf("conversations %s, %s (named clients %v, %v): want one per token", c1, c2, a["conversationId"], b["conversationId"])
	}
}

// TestRequestStateIsThisCommandsProposal: a retried call's requestState
// reports a proposal only when it is this tool's command, made by this
// client; another visible proposal is a validation error, not its state.
func TestRequestStateIsThisCommandsProposal(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	retry := func(token, tool, args, state string) (int, string) {
		resp, body := d.post(token, "", strings.Replace(toolCall(tool, args), `"arguments":`, `"requestState":"`+state+`","arguments":`, 1))
		return resp.StatusCode, body
	}
	_, body := d.post(d.agent, "", toolCall("set_schedule_enabled", `{"schedule":"nightly-audit","enabled":true}`))
	i := strings.Index(body, `\"proposalId\":\"`)
	if i < 0 {
		t.Fatalf("no proposal: %s", body)
	}
	pid := body[i+len(`\"proposalId\":\"`):][:36]
	if status, body := retry(d.agent, "set_schedule_enabled", `{"schedule":"nightly-audit","enabled":true}`, pid); status != 200 || !strings.Contains(body, pid) || strings.Contains(body, `"isError":true`) {
		t.Fatalf("the same command's retry: %d %s", status, body)
	}
	for _, tc := range []struct{ name, token, tool, args string }{
		{"another command", d.agent, "delete_schedule", `{"schedule":"nightly-audit"}`},
		{"another client", d.operator, "set_schedule_enabled", `{"schedule":"nightly-audit","enabled":true}`},
	} {
		status, body := retry(tc.token, tc.tool, tc.args, pid)
		if status != 200 {
			t.Fatalf("%s: %d %s", tc.name, status, body)
		}
		if e := toolError(t, body); e.Code != protocol.Validation || strings.Contains(body, `\"status\":\"pending\"`) {
			t.Errorf("%s with another's requestState: %+v %s", tc.name, e, body)
		}
	}
}

// TestNoSecondElicitationForAResend: a resend that finds its proposal
// pending (existing) answers it without asking the client to open the
// card again.
func TestNoSecondElicitationForAResend(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	var mu sync.Mutex
	asked := 0
	s := d.connect(d.agent, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked++
			mu.Unlock()
			return &mcp.ElicitResult{Action: "decline"}, nil
		}})
	_, first := call(t, s, "set_schedule_enabled", enable())
	_, again := call(t, s, "set_schedule_enabled", enable())
	if first["proposalId"] != again["proposalId"] || again["existing"] != true {
		t.Fatalf("resend: %v, first %v", again, first)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 1 {
		t.Fatalf("%d elicitations for one proposal, want 1", asked)
	}
}

// TestToolErrorsNameNoGoTypes: invalid arguments are explained in the
// client's terms (where in the JSON, what was wanted), never with a Go
// type's name.
func TestToolErrorsNameNoGoTypes(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	s := d.connect(d.agent, nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"get_proposal", map[string]any{"proposalId": 5}, "/proposalId"},
		{"get_proposal", map[string]any{"proposal": "x"}, "unknown field"},
		{"create_playbook", map[string]any{"name": 3, "prompt": "x"}, "/name"},
		{"list_runs", map[string]any{"limit": "ten"}, "/limit"},
	} {
		res, out := call(t, s, tc.tool, tc.args)
		msg := mustJSON(out)
		if !res.IsError || !strings.Contains(msg, tc.want) || strings.Contains(msg, "Go ") || strings.Contains(msg, "struct") || strings.Contains(msg, "studio.") {
			t.Errorf("%s %v: %s, want a validation error at %s naming no Go type", tc.tool, tc.args, msg, tc.want)
		}
	}
}
