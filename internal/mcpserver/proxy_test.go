package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

// proxied is a local client connected to a proxy (as `studio mcp` runs
// it) of the daemon with a token, speaking revision version.
func (d *daemon) proxied(token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	d.t.Helper()
	p := mcpserver.NewProxy(d.srv.URL, token, "test")
	d.t.Cleanup(p.Close)
	srv, err := p.Server(d.ctx())
	if err != nil {
		d.t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(d.ctx(), st, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, opts).Connect(d.ctx(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { cs.Close() })
	return cs
}

// TestProxyPassesRefusalsAsTheyAre: through the stdio proxy the daemon's
// refusals reach the local client as the daemon gave them — rate_limited
// with retryAfterMs, never turned into a retryable service_failure — and
// a viewer's tool list has no command tool.
func TestProxyPassesRefusalsAsTheyAre(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{callsPerMinute: 1, burst: 3})
	s := d.proxied(d.agent, "", nil)
	var last map[string]any
	var res *mcp.CallToolResult
	for range 4 { // the proxy's own tools/list took the first token
		res, last = call(t, s, "list_runs", map[string]any{})
		if res.IsError {
			break
		}
	}
	e, _ := last["error"].(map[string]any)
	if !res.IsError || e["code"] != string(protocol.RateLimited) || e["retryable"] != true || e["retryAfterMs"] == nil {
		t.Fatalf("past the rate through the proxy: %v", last)
	}

	list, err := d.proxied(d.viewer, "", nil).ListTools(d.ctx(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if tl.Annotations == nil || !tl.Annotations.ReadOnlyHint {
			t.Errorf("a viewer's proxy offers %s", tl.Name)
		}
	}
}

// TestProxyElicitsOnceWithoutBlocking: a local client before 2026-07-28
// that opens URLs is asked once per new proposal; the call answers while
// the question is still open (nobody may be at the keyboard), and
// neither get_proposal of the pending proposal nor a resend asks again.
func TestProxyElicitsOnceWithoutBlocking(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	release := make(chan struct{})
	var mu sync.Mutex
	var asked []string
	s := d.proxied(d.agent, "2025-11-25", &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.URL)
			mu.Unlock()
			select { // an unanswered dialog
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		}})
	t.Cleanup(func() { close(release) }) // before the sessions close

	// The call must answer while the dialog is open: bounded, so that a
	// proxy that waits for the answer fails here rather than hangs.
	ctx, cancel := context.WithTimeout(d.ctx(), 15*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "set_schedule_enabled", Arguments: enable()})
	if err != nil || res.IsError {
		t.Fatalf("command while the elicitation is unanswered: %v %+v", err, res)
	}
	first := structuredOf(t, res)
	if first["status"] != "pending" {
		t.Fatalf("command: %v", first)
	}
	pid := first["proposalId"].(string)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(asked)
	}
	testutil.Eventually(t, func() bool { return count() == 1 })
	if _, got := call(t, s, "get_proposal", map[string]any{"proposalId": pid}); got["status"] != "pending" {
		t.Fatalf("get_proposal: %v", got)
	}
	if _, again := call(t, s, "set_schedule_enabled", enable()); again["existing"] != true || again["proposalId"] != pid {
		t.Fatalf("resend: %v", again)
	}
	// A new proposal is asked about: once it is, nothing was asked between.
	if _, err := d.api(d.operator).Deny(d.ctx(), first["conversationId"].(string), pid); err != nil {
		t.Fatal(err)
	}
	_, second := call(t, s, "delete_schedule", map[string]any{"schedule": "nightly-audit"})
	testutil.Eventually(t, func() bool { return count() >= 2 })
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || !strings.Contains(asked[0], pid) || !strings.Contains(asked[1], second["proposalId"].(string)) {
		t.Fatalf("elicitations %v: want one for %s, then one for %v", asked, pid, second["proposalId"])
	}
}

// TestProxyRetryIsThisCommand: a 2026-07-28 local client answers the
// proxy's input request and retries; the retry reports this command's
// proposal, pending, and no answer confirmed it.
func TestProxyRetryIsThisCommand(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	s := d.proxied(d.agent, "", &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept"}, nil
		}})
	res, out := call(t, s, "set_schedule_enabled", enable())
	if res.IsError || out["status"] != "pending" || out["commandType"] != "set_schedule_enabled" {
		t.Fatalf("after the input request: %v", out)
	}
	if d.schedule().Enabled || len(d.decisions(out["proposalId"].(string))) != 0 {
		t.Fatal("the client's accept decided something")
	}
}

// structuredOf decodes a tool result's structured content.
func structuredOf(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(mustJSON(res.StructuredContent)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
