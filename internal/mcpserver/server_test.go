package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// TestListTools: the registry's read tools (read-only, closed world) and
// one proposal-making tool per application command (destructive exactly
// for destructive, irreversible and admin commands; idempotent), plus
// get_proposal; no cockpit tool (navigate, draft, the current view).
func TestListTools(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	s := d.connect(d.agent, nil)
	res, err := s.ListTools(d.ctx(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	for _, name := range []string{"list_runs", "get_run", "list_schedules", "system_health", "get_proposal"} {
		tl := byName[name]
		if tl == nil {
			t.Fatalf("read tool %s not offered", name)
		}
		a := tl.Annotations
		if a == nil || !a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint != nil {
			t.Errorf("%s annotations %+v: want readOnly, not open-world", name, a)
		}
		var schema map[string]any
		b, _ := json.Marshal(tl.InputSchema)
		if json.Unmarshal(b, &schema) != nil || schema["type"] != "object" {
			t.Errorf("%s input schema %s", name, b)
		}
	}
	for _, name := range []string{"navigate", "get_current_view", "select", "prefill_form"} {
		if byName[name] != nil {
			t.Errorf("cockpit tool %s is offered", name)
		}
	}
	for _, cs := range studio.Commands() {
		tl := byName[cs.Type]
		if tl == nil {
			t.Fatalf("command %s not offered", cs.Type)
		}
		a := tl.Annotations
		want := cs.Impact.Destructive() || cs.Risk == protocol.RiskAdmin
		if a.ReadOnlyHint || !a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint != want {
			t.Errorf("%s (risk %s, impact %q) annotations %+v: want destructive %v, idempotent", cs.Type, cs.Risk, cs.Impact, a, want)
		}
		if !strings.Contains(tl.Description, "proposal") || !strings.HasSuffix(tl.Description, mcpserver.ConfirmationNote) {
			t.Errorf("%s description does not say it needs a human's confirmation: %q", cs.Type, tl.Description)
		}
		// Runs call a model provider: the tools that start them reach
		// beyond Studio's own data.
		open := cs.Type == "launch_playbook" || cs.Type == "launch_workflow" || cs.Type == "retry_run"
		if a.OpenWorldHint == nil || *a.OpenWorldHint != open {
			t.Errorf("%s openWorldHint %v, want %v", cs.Type, a.OpenWorldHint, open)
		}
	}
	// Beside another server's tools (a CI system's runs and workflows),
	// each description says whose tool it is.
	for _, tl := range res.Tools {
		if !strings.Contains(tl.Description, "Studio") {
			t.Errorf("%s description does not say Studio: %q", tl.Name, tl.Description)
		}
	}
	if d := byName["get_proposal"].Description; !strings.Contains(d, "at most every 30 seconds") || !strings.Contains(d, "expiresAt") {
		t.Errorf("get_proposal gives no advice on polling: %q", d)
	}
}

// TestToolsListFilteredByCaller: tools/list shows what the caller may
// call — a viewer the read tools only, an agent the command tools too.
func TestToolsListFilteredByCaller(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	names := func(token string) map[string]bool {
		res, err := d.connect(token, nil).ListTools(d.ctx(), nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, tl := range res.Tools {
			out[tl.Name] = true
		}
		return out
	}
	viewer, agent := names(d.viewer), names(d.agent)
	for _, cs := range studio.Commands() {
		if viewer[cs.Type] {
			t.Errorf("a viewer's tools/list offers %s, which it may not call", cs.Type)
		}
		if !agent[cs.Type] {
			t.Errorf("an agent's tools/list lacks %s", cs.Type)
		}
	}
	for _, name := range []string{"list_runs", "system_health", "get_proposal"} {
		if !viewer[name] || !agent[name] {
			t.Errorf("%s missing: viewer %v, agent %v", name, viewer[name], agent[name])
		}
	}
}

// enable asks to enable the seeded schedule, which starts paused.
func enable() map[string]any { return map[string]any{"schedule": "nightly-audit", "enabled": true} }

// schedule reads the seeded schedule over HTTP.
func (d *daemon) schedule() studio.Schedule {
	d.t.Helper()
	sc, err := d.api(d.operator).GetSchedule(d.ctx(), "nightly-audit")
	if err != nil {
		d.t.Fatal(err)
	}
	return sc
}

// decisions are the audit decisions recorded for a proposal, by actor.
func (d *daemon) decisions(proposalID string) map[protocol.Decision][]string {
	d.t.Helper()
	rows, err := d.db.ListAdminEvents(d.ctx(), store.ListAdminEventsParams{Action: protocol.AuditAction, TargetID: proposalID, Limit: 50})
	if err != nil {
		d.t.Fatal(err)
	}
	out := map[protocol.Decision][]string{}
	for _, r := range rows {
		var a protocol.CommandAudit
		if err := protocol.Unmarshal(r.Details, &a); err != nil {
			d.t.Fatal(err)
		}
		out[a.Decision] = append(out[a.Decision], r.Actor)
	}
	return out
}

// TestCommandToolProposesAndAHumanConfirms: a read tool answers; a
// command tool answers at once with a pending proposal (nothing changed);
// the agent cannot confirm it; a human operator confirms it over HTTP; the
// command ran once, the proposal authored by the agent and decided by
// the human, and get_proposal reports the result.
func TestCommandToolProposesAndAHumanConfirms(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	s := d.connect(d.agent, nil)

	res, out := call(t, s, "list_schedules", map[string]any{})
	if res.IsError || !strings.Contains(mustJSON(out), "nightly-audit") {
		t.Fatalf("list_schedules: %v %v", res.IsError, out)
	}

	res, out = call(t, s, "set_schedule_enabled", enable())
	if res.IsError {
		t.Fatalf("set_schedule_enabled: %v", out)
	}
	pid, _ := out["proposalId"].(string)
	if out["status"] != "pending" || pid == "" || out["commandHash"] == "" || out["risk"] != protocol.RiskMutate ||
		out["expiresAt"] == "" || out["target"] == nil || !strings.Contains(out["cockpitUrl"].(string), url.QueryEscape(pid)) {
		t.Fatalf("pending result: %v", out)
	}
	if d.schedule().Enabled {
		t.Fatal("the schedule changed before anyone confirmed")
	}
	conv := out["conversationId"].(string)
	st, err := d.api(d.operator).Proposal(d.ctx(), pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.CommandHash != out["commandHash"] || st.SubmittedBy != "claude" {
		t.Fatalf("stored proposal %+v: hash %v, submitted by claude", st, out["commandHash"])
	}
	if _, got := call(t, s, "get_proposal", map[string]any{"proposalId": pid}); got["status"] != "pending" {
		t.Fatalf("get_proposal before the decision: %v", got)
	}

	// The agent's own token cannot confirm.
	_, err = d.api(d.agent).Confirm(d.ctx(), conv, pid, protocol.ConfirmProposalRequest{ExpectedCommandHash: st.CommandHash})
	if protocol.CodeOf(err) != protocol.Denied {
		t.Fatalf("agent confirm: %v, want denied", err)
	}
	if d.schedule().Enabled {
		t.Fatal("the agent's confirm changed the schedule")
	}

	r, err := d.api(d.operator).Confirm(d.ctx(), conv, pid, protocol.ConfirmProposalRequest{ExpectedCommandHash: st.CommandHash})
	if err != nil || r.Status != protocol.ResultSucceeded {
		t.Fatalf("human confirm: %+v %v", r, err)
	}
	if !d.schedule().Enabled {
		t.Fatal("the confirmed command did not run")
	}
	_, got := call(t, s, "get_proposal", map[string]any{"proposalId": pid})
	if got["status"] != "succeeded" || got["result"] == nil || got["decidedBy"] != "alice" || got["submittedBy"] != "claude" {
		t.Fatalf("get_proposal after the decision: %v", got)
	}
	proposed, err := d.db.ListAdminEvents(d.ctx(), store.ListAdminEventsParams{Action: coordinator.AgentProposedAction, TargetID: pid, Limit: 50})
	if err != nil || len(proposed) != 1 || proposed[0].Actor != "claude" || !strings.Contains(string(proposed[0].Details), "test-agent") {
		t.Fatalf("the agent's proposal in the audit: %+v %v", proposed, err)
	}
	dec := d.decisions(pid)
	if len(dec[protocol.DecisionExecuted]) != 1 || len(dec[protocol.DecisionConfirmed]) != 1 || dec[protocol.DecisionConfirmed][0] != "alice" {
		t.Fatalf("audit decisions %v: want one confirmed by alice, one executed", dec)
	}
	// The same call again is a new proposal (the first is settled): the
	// schedule is enabled already, which the application refuses.
	res, out = call(t, s, "set_schedule_enabled", enable())
	if !res.IsError {
		t.Logf("second call: %v", out)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestResendsMakeOneProposal: three resends of the same call (at once, as
// after a broken stream) answer one proposal; another command while it is
// pending is conflict.
func TestResendsMakeOneProposal(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	s := d.connect(d.agent, nil)
	ids := make([]string, 3)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			res, err := s.CallTool(d.ctx(), &mcp.CallToolParams{Name: "set_schedule_enabled", Arguments: enable()})
			if err != nil || res.IsError {
				t.Errorf("call %d: %v %+v", i, err, res)
				return
			}
			b, _ := json.Marshal(res.StructuredContent)
			var out map[string]any
			_ = json.Unmarshal(b, &out)
			ids[i], _ = out["proposalId"].(string)
		})
	}
	wg.Wait()
	if ids[0] == "" || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("proposal ids %v: want one", ids)
	}
	ps, err := d.db.ListProposals(d.ctx(), store.ListProposalsParams{Limit: 10})
	if err != nil || len(ps) != 1 {
		t.Fatalf("%d proposals (%v), want 1", len(ps), err)
	}
	res, out := call(t, s, "delete_schedule", map[string]any{"schedule": "nightly-audit"})
	if !res.IsError || !strings.Contains(mustJSON(out), string(protocol.Conflict)) || !strings.Contains(mustJSON(out), ids[0]) {
		t.Fatalf("another command while one is pending: %v", out)
	}
}

// TestElicitationAcceptIsNotConsent: a client of protocol 2026-07-28 that
// takes URL elicitation is asked to open the proposal's card; it answers
// accept, and the proposal stays pending: nothing ran, nothing decided.
func TestElicitationAcceptIsNotConsent(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	var asked []*mcp.ElicitParams
	var mu sync.Mutex
	s := d.connect(d.agent, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}})
	res, out := call(t, s, "set_schedule_enabled", enable())
	if res.IsError {
		t.Fatal(out)
	}
	pid := out["proposalId"].(string)
	mu.Lock()
	if len(asked) != 1 || asked[0].Mode != "url" || !strings.Contains(asked[0].URL, pid) {
		t.Fatalf("elicitations %+v: want one URL-mode pointing at %s", asked, pid)
	}
	mu.Unlock()
	if out["status"] != "pending" {
		t.Fatalf("after accept: %v", out)
	}
	if len(d.decisions(pid)) != 0 || d.schedule().Enabled {
		t.Fatalf("the accept decided something: %v", d.decisions(pid))
	}
	if _, got := call(t, s, "get_proposal", map[string]any{"proposalId": pid}); got["status"] != "pending" {
		t.Fatalf("get_proposal: %v", got)
	}
}

// TestExpiredProposalNeverRuns: past its expiry a proposal reports
// expired, a human's confirm is refused, and the command never runs.
func TestExpiredProposalNeverRuns(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	s := d.connect(d.agent, nil)
	res, out := call(t, s, "set_schedule_enabled", enable())
	if res.IsError {
		t.Fatal(out)
	}
	pid, conv := out["proposalId"].(string), out["conversationId"].(string)
	d.clock.Advance(coordinator.DefaultProposalTTL + time.Second)
	if _, got := call(t, s, "get_proposal", map[string]any{"proposalId": pid}); got["status"] != "expired" {
		t.Fatalf("get_proposal past expiry: %v", got)
	}
	// The same command again: the expired one is closed, a new one made.
	res, again := call(t, s, "set_schedule_enabled", enable())
	if res.IsError || again["proposalId"] == pid || again["status"] != "pending" {
		t.Fatalf("the command again after the expiry: %v", again)
	}
	r, err := d.api(d.operator).Confirm(d.ctx(), conv, pid, protocol.ConfirmProposalRequest{ExpectedCommandHash: out["commandHash"].(string)})
	if err != nil || r.Status != protocol.ResultExpired {
		t.Fatalf("confirm past expiry: %+v %v", r, err)
	}
	if d.schedule().Enabled || len(d.decisions(pid)[protocol.DecisionExecuted]) != 0 {
		t.Fatal("an expired proposal ran")
	}
	if _, got := call(t, s, "get_proposal", map[string]any{"proposalId": pid}); got["status"] != "expired" {
		t.Fatalf("get_proposal after the refused confirm: %v", got)
	}
}

// post sends one JSON-RPC message to /mcp as a 2026-07-28 client.
func (d *daemon) post(token, origin, body string) (*http.Response, string) {
	return d.send(token, "2026-07-28", origin, body)
}

// send POSTs a raw body to /mcp as a client of a protocol revision
// ("" sends no MCP-Protocol-Version header, as clients before 2025-06-18),
// with the request headers its revision asks for.
func (d *daemon) send(token, version, origin, body string) (*http.Response, string) {
	d.t.Helper()
	req, _ := http.NewRequestWithContext(d.ctx(), http.MethodPost, d.srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if version >= "2026-07-28" {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(body), &msg)
		req.Header.Set("Mcp-Method", msg.Method)
		if msg.Params.Name != "" {
			req.Header.Set("Mcp-Name", msg.Params.Name)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := d.srv.Client().Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const listTools = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

// TestUnauthorizedSaysHowToSendAToken: no token (or one in the query)
// is 401 saying how to make and send a bearer token; Studio is no OAuth
// resource, so the 401 names no protected-resource metadata and every
// address an OAuth client probes is 404 with the same advice — an OAuth
// host stops at a clear message instead of a failing discovery.
func TestUnauthorizedSaysHowToSendAToken(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	for _, tc := range []struct{ name, token, query string }{{"none", "", ""}, {"wrong", "stu_nope", ""}, {"query", "", "?access_token=" + d.agent}} {
		req, _ := http.NewRequest(http.MethodPost, d.srv.URL+"/mcp"+tc.query, strings.NewReader(listTools))
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata") ||
			!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(string(b), "studio tokens create") {
			t.Errorf("%s: %d %q %s, want 401 Bearer without resource_metadata, saying how to make a token", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
		}
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
		"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		resp, err := d.srv.Client().Get(d.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e protocol.ErrorBody
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal(b, &e) != nil || e.Error == nil ||
			!strings.Contains(e.Error.Message, "Authorization: Bearer") || strings.Contains(string(b), "authorization_servers") {
			t.Errorf("GET %s: %d %s, want 404 saying to send a bearer token", path, resp.StatusCode, b)
		}
	}
}

// TestForeignOriginRefused: a request from another origin is 403 before
// anything else; the daemon's own origin is served.
func TestForeignOriginRefused(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	resp, body := d.post(d.agent, "http://evil.example", listTools)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"denied"`) {
		t.Fatalf("foreign origin: %d %s", resp.StatusCode, body)
	}
	resp, body = d.post(d.agent, d.srv.URL, listTools)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "list_runs") {
		t.Fatalf("own origin: %d %s", resp.StatusCode, body)
	}
}

func toolCall(name string, args string) string {
	return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
}

// toolError is the {"error": ProtocolError} of an isError tool result in
// a JSON-RPC response body.
func toolError(t *testing.T, body string) *protocol.Error {
	t.Helper()
	var resp struct {
		Result struct {
			IsError           bool               `json:"isError"`
			StructuredContent protocol.ErrorBody `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || !resp.Result.IsError || resp.Result.StructuredContent.Error == nil {
		t.Fatalf("not an isError tool result with an error: %s (%v)", body, err)
	}
	return resp.Result.StructuredContent.Error
}

// TestRoleRefusedAndRateLimited: a viewer may read but not propose, and
// past its rate a principal's calls are refused — both as the call's
// isError result (HTTP 200) with a machine-readable code, the reason,
// retryable, and retryAfterMs for the rate, so that a model neither
// retries a denial nor misses when to retry.
func TestRoleRefusedAndRateLimited(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{callsPerMinute: 1, burst: 2})
	resp, body := d.post(d.viewer, "", toolCall("set_schedule_enabled", `{"schedule":"nightly-audit","enabled":false}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("viewer command: %d %s, want 200 with an error result", resp.StatusCode, body)
	}
	if e := toolError(t, body); e.Code != protocol.Denied || e.Retryable || e.Details["reason"] != "role" || e.Details["needed"] != "agent" {
		t.Fatalf("viewer command: %+v", e)
	}
	for i := range 2 {
		if resp, body := d.post(d.agent, "", toolCall("list_runs", `{}`)); resp.StatusCode != http.StatusOK || strings.Contains(body, `"isError":true`) {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body = d.post(d.agent, "", toolCall("list_runs", `{}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("past the rate: %d %s, want 200 with an error result", resp.StatusCode, body)
	}
	if e := toolError(t, body); e.Code != protocol.RateLimited || !e.Retryable || e.RetryAfterMs <= 0 || e.Details["limit"] != "mcp_calls_per_minute" {
		t.Fatalf("past the rate: %+v", e)
	}
	// Metrics count the calls by tool and outcome.
	req, _ := http.NewRequest(http.MethodGet, d.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+ownerToken)
	mr, err := d.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Body.Close()
	m, _ := io.ReadAll(mr.Body)
	for _, want := range []string{`studio_mcp_tool_calls_total{outcome="ok",tool="list_runs"} 2`, `studio_mcp_tool_calls_total{outcome="rate_limited",tool="list_runs"} 1`,
		`studio_mcp_tool_calls_total{outcome="role_denied",tool="set_schedule_enabled"} 1`, `studio_mcp_tool_call_duration_seconds_count{tool="list_runs"} 2`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestNoToolDecidesProposals: no offered tool confirms, denies or amends a
// proposal; only a human's role does, outside MCP.
func TestNoToolDecidesProposals(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	s := d.connect(d.agent, nil)
	res, err := s.ListTools(d.ctx(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		for _, verb := range []string{"confirm", "deny", "amend", "approve"} {
			if strings.Contains(tl.Name, verb) {
				t.Errorf("tool %s decides proposals", tl.Name)
			}
		}
	}
	if r, err := s.CallTool(d.ctx(), &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{}}); err == nil && !r.IsError {
		t.Fatalf("confirm_proposal answered %+v", r)
	}
}

// TestProposalCapPerWindow: an agent's conversation makes at most
// MaxProposalsPerTurn proposals per ProposalTTL, as a model's turn; past
// it rate_limited with retryAfterMs.
func TestProposalCapPerWindow(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	s := d.connect(d.agent, nil)
	for i := range coordinator.DefaultMaxProposalsPerTurn {
		res, out := call(t, s, "set_schedule_enabled", enable())
		if res.IsError {
			t.Fatalf("proposal %d: %v", i, out)
		}
		if _, err := d.api(d.operator).Deny(d.ctx(), out["conversationId"].(string), out["proposalId"].(string)); err != nil {
			t.Fatal(err)
		}
	}
	res, out := call(t, s, "set_schedule_enabled", enable())
	e, _ := out["error"].(map[string]any)
	if !res.IsError || e["code"] != string(protocol.RateLimited) || e["retryAfterMs"].(float64) <= 0 {
		t.Fatalf("past the cap: %v", out)
	}
	d.clock.Advance(coordinator.DefaultProposalTTL)
	if res, out := call(t, s, "set_schedule_enabled", enable()); res.IsError {
		t.Fatalf("after the window: %v", out)
	}
}

// TestResultsRedactedAndBodiesBounded: a secret in application data never
// reaches a tool result; a body over the bound is refused.
func TestResultsRedactedAndBodiesBounded(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	const secret = "sk-proj-4fX9aQ2LmZ7bT1cR8dV3eW6gH0jK5nP2sU7yB9"
	if _, err := d.api(ownerToken).CreatePlaybook(d.ctx(), studio.CreatePlaybookCommand{Name: "leaky",
		Prompt: "Call the API with key " + secret + " and report."}); err != nil {
		t.Fatal(err)
	}
	s := d.connect(d.viewer, nil)
	res, out := call(t, s, "get_playbook", map[string]any{"playbook": "leaky"})
	if res.IsError || !strings.Contains(mustJSON(out), "leaky") || strings.Contains(mustJSON(res), secret) {
		t.Fatalf("get_playbook: %s", mustJSON(res))
	}
	resp, body := d.post(d.viewer, "", toolCall("list_runs", `{"pad":"`+strings.Repeat("x", mcpserver.MaxBody)+`"}`))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"validation"`) {
		t.Fatalf("an oversized body: %d %.200s", resp.StatusCode, body)
	}
}

// TestFourEyesCountsTheCallerAsAuthor: with --second-approver-for mutate,
// a principal that proposed through MCP cannot confirm its own proposal
// (an operator using an assistant); another operator can.
func TestFourEyesCountsTheCallerAsAuthor(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{secondApprover: []string{protocol.RiskMutate}})
	s := d.connect(d.operator, nil)
	res, out := call(t, s, "set_schedule_enabled", enable())
	if res.IsError {
		t.Fatal(out)
	}
	pid, conv, hash := out["proposalId"].(string), out["conversationId"].(string), out["commandHash"].(string)
	_, err := d.api(d.operator).Confirm(d.ctx(), conv, pid, protocol.ConfirmProposalRequest{ExpectedCommandHash: hash})
	if pe := protocol.ErrorOf(err); pe.Code != protocol.Denied || pe.Details["reason"] != "second_approver_required" {
		t.Fatalf("the author's own confirm: %v", err)
	}
	bob := d.token("bob", protocol.RoleOperator)
	r, err := d.api(bob).Confirm(d.ctx(), conv, pid, protocol.ConfirmProposalRequest{ExpectedCommandHash: hash})
	if err != nil || r.Status != protocol.ResultSucceeded {
		t.Fatalf("another operator's confirm: %+v %v", r, err)
	}
}
