package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// postBatch sends a JSON-RPC batch as a client of a revision that has
// them (no MCP-Protocol-Version header: 2025-03-26).
func (d *daemon) postBatch(token, body string) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequestWithContext(d.ctx(), http.MethodPost, d.srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := d.srv.Client().Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// TestBatchCallsAreDecidedEachOne: each call of a JSON-RPC batch asks the
// policy as a single call does: a viewer's batch proposes nothing.
func TestBatchCallsAreDecidedEachOne(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"set_schedule_enabled","arguments":{"schedule":"nightly-audit","enabled":true}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_runs","arguments":{}}}]`
	status, body := d.postBatch(d.viewer, batch)
	ps, err := d.db.ListProposals(d.ctx(), store.ListProposalsParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 0 {
		t.Fatalf("a viewer's batch made %d proposals (answer %d %s)", len(ps), status, body)
	}
	if status == http.StatusOK && !strings.Contains(body, `"denied"`) {
		t.Fatalf("the batch's command call was not refused: %s", body)
	}
}

// TestSystemHealthToolShowsOnlyWhatOneMayRead: the system_health tool,
// like the API, leaves another principal's private conversation out.
func TestSystemHealthToolShowsOnlyWhatOneMayRead(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, daemonOpts{})
	agent := d.connect(d.agent, nil)
	if res, _ := call(t, agent, "set_schedule_enabled", map[string]any{"schedule": "nightly-audit", "enabled": true}); res.IsError {
		t.Fatalf("propose: %+v", res)
	}
	ps, err := d.db.ListProposals(d.ctx(), store.ListProposalsParams{Limit: 1})
	if err != nil || len(ps) != 1 {
		t.Fatal(ps, err)
	}
	p := ps[0]
	private := protocol.VisibilityPrivate
	if _, err := d.db.UpdateConversation(d.ctx(), store.UpdateConversationParams{ID: p.ConversationID, Visibility: &private, Now: d.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	// Confirmed, its result never recorded: indeterminate.
	if _, err := d.db.ConfirmProposal(d.ctx(), store.ConfirmProposalParams{ID: p.ID, Now: d.clock.Now(),
		Audit: store.AppendAdminEventParams{Actor: "alice", Action: protocol.AuditAction, TargetID: &p.ID, Details: []byte(`{}`), Now: d.clock.Now()}}); err != nil {
		t.Fatal(err)
	}
	shows := func(token string) bool {
		_, out := call(t, d.connect(token, nil), "system_health", map[string]any{})
		b, _ := json.Marshal(out)
		return strings.Contains(string(b), p.ID) || strings.Contains(string(b), p.ConversationID)
	}
	if shows(d.viewer) || shows(d.operator) {
		t.Fatal("system_health lists another principal's private conversation")
	}
	if !shows(d.agent) || !shows(ownerToken) {
		t.Fatal("system_health misses the indeterminate proposal for its owner or an admin")
	}
}
