package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// rpc POSTs a raw body to /mcp as a client of a protocol revision.
func (d *daemon) rpc(token, version, body string) (*http.Response, string) {
	d.t.Helper()
	return d.send(token, version, "", body)
}

// rpcError decodes a JSON-RPC error response.
func rpcError(t *testing.T, resp *http.Response, body string) (code int, msg string) {
	t.Helper()
	var r struct {
		JSONRPC string `json:"jsonrpc"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("content type %q, want JSON: %s", ct, body)
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.JSONRPC != "2.0" || r.Error == nil {
		t.Fatalf("not a JSON-RPC error: %s (%v)", body, err)
	}
	return r.Error.Code, r.Error.Message
}

// TestOtherMethodsAre405: GET, DELETE and OPTIONS of /mcp are 405 with
// Allow: POST (stateless: no stream to open, no session to end), so a
// client's optional GET stream ends quietly instead of with an error.
func TestOtherMethodsAre405(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodOptions, http.MethodPut} {
		req, _ := http.NewRequest(method, d.srv.URL+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+d.agent)
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
			t.Errorf("%s /mcp: %d Allow %q, want 405 Allow POST", method, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}

// TestBadBodiesAndUnservedMethodsAreJSONRPC: a body that is not JSON is
// -32700, JSON that is no JSON-RPC message -32600, a method Studio does
// not serve (an unknown one, or resources, prompts, logging it never
// declared) -32601 — as JSON-RPC error objects, HTTP 404 at 2026-07-28
// as its transport asks, 200 before.
func TestBadBodiesAndUnservedMethodsAreJSONRPC(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	for _, tc := range []struct {
		name, version, body string
		status, code        int
	}{
		{"not JSON", "2025-11-25", `{"jsonrpc":"2.0","id":1,`, 400, -32700},
		{"not JSON-RPC", "2025-11-25", `{"hello":"world"}`, 400, -32600},
		{"empty batch", "", `[]`, 400, -32600},
		{"unknown method", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/explode"}`, 200, -32601},
		{"resources/list", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`, 200, -32601},
		{"prompts/list", "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"prompts/list"}`, 200, -32601},
		{"logging/setLevel", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`, 200, -32601},
		{"unknown method at 2026-07-28", "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"tools/explode","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, 404, -32601},
		{"resources/read at 2026-07-28", "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"x:y","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, 404, -32601},
	} {
		resp, body := d.rpc(d.agent, tc.version, tc.body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, resp.StatusCode, tc.status, body)
			continue
		}
		if code, msg := rpcError(t, resp, body); code != tc.code || msg == "" {
			t.Errorf("%s: code %d %q, want %d", tc.name, code, msg, tc.code)
		}
	}
}

// TestCapabilitiesAreThoseDelivered: initialize declares tools and
// nothing a stateless server cannot deliver — no list-change
// notifications, no logging, no resources or prompts.
func TestCapabilitiesAreThoseDelivered(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	for _, version := range []string{"2025-03-26", "2025-11-25"} {
		resp, body := d.rpc(d.agent, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+
			`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		var r struct {
			Result struct {
				Capabilities map[string]json.RawMessage `json:"capabilities"`
			} `json:"result"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil {
			t.Fatalf("initialize %s: %d %s", version, resp.StatusCode, body)
		}
		if len(r.Result.Capabilities) != 1 || string(r.Result.Capabilities["tools"]) != "{}" {
			t.Errorf("initialize %s: capabilities %s, want exactly {\"tools\":{}}", version, body)
		}
	}
	s := d.connect(d.agent, nil) // 2026-07-28: server/discover
	if caps := mustJSON(s.InitializeResult().Capabilities); caps != `{"tools":{}}` {
		t.Errorf("discovered capabilities %s, want exactly {\"tools\":{}}", caps)
	}
}

// TestBatchDecidedPerElement: a batch (JSON-RPC 2.0, which MCP up to
// 2025-03-26 allows) is decided and rate-limited element by element: a
// viewer's batched command is refused as that element's error result and
// makes no proposal; an agent's batch of more calls than its burst has the
// rest rate_limited. From 2025-06-18 on a batch is refused as JSON-RPC.
func TestBatchDecidedPerElement(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{callsPerMinute: 60, burst: 5})
	resp, body := d.rpc(d.viewer, "", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"set_schedule_enabled","arguments":{"schedule":"nightly-audit","enabled":true}}}]`)
	var results []struct {
		ID     int `json:"id"`
		Result struct {
			IsError           bool               `json:"isError"`
			StructuredContent protocol.ErrorBody `json:"structuredContent"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &results) != nil || len(results) != 1 {
		t.Fatalf("a viewer's batch: %d %s", resp.StatusCode, body)
	}
	if e := results[0].Result.StructuredContent.Error; !results[0].Result.IsError || e == nil || e.Code != protocol.Denied {
		t.Fatalf("a viewer's batched command: %s", body)
	}
	if ps, err := d.db.ListProposals(d.ctx(), store.ListProposalsParams{Limit: 10}); err != nil || len(ps) != 0 {
		t.Fatalf("a viewer's batch made %d proposals (%v)", len(ps), err)
	}

	var batch []string
	for i := range 12 {
		batch = append(batch, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_runs","arguments":{}}}`, i+1))
	}
	resp, body = d.rpc(d.agent, "2025-03-26", "["+strings.Join(batch, ",")+"]")
	results = nil
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &results) != nil || len(results) != 12 {
		t.Fatalf("an agent's batch of 12: %d %.500s", resp.StatusCode, body)
	}
	limited := 0
	for _, r := range results {
		if e := r.Result.StructuredContent.Error; r.Result.IsError && e != nil && e.Code == protocol.RateLimited && e.RetryAfterMs > 0 {
			limited++
		}
	}
	if limited != 12-5 {
		t.Fatalf("%d of 12 batched calls rate_limited, want 7 past a burst of 5: %.800s", limited, body)
	}

	resp, body = d.rpc(d.agent, "2025-06-18", "["+batch[0]+"]")
	if code, _ := rpcError(t, resp, body); resp.StatusCode != http.StatusBadRequest || code != -32600 {
		t.Fatalf("a batch at 2025-06-18: %d %s", resp.StatusCode, body)
	}
}
