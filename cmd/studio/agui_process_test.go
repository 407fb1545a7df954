package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

// aguiScript answers the AG-UI client's runs: a read question, a
// navigation, a proposal, and a slow answer the client leaves mid-way.
const aguiScript = `{"turns":[
 {"match":"hello","steps":[{"text":"Hel"},{"text":"lo. "},{"tool":"get_playbook","arguments":{"playbook":"audit-repo"}},{"text":"It audits a repository."}]},
 {"match":"go fleet","steps":[{"tool":"navigate","arguments":{"space":"mission","params":{"view":"fleet","status":"failed"}}},{"text":"I asked the cockpit to show them."}]},
 {"match":"launch","steps":[{"text":"I will propose it. "},{"tool":"launch_playbook","arguments":{"playbook":"audit-repo","input":"repo x","args":{"repo":"x"}}},{"text":"The operator decided."}]},
 {"match":"slow","steps":[{"text":"first "},{"sleepMs":1500},{"text":"second"}]},
 {"steps":[{"text":"ok"}]}]}`

// aguiClient is node and checks/agui-client-check, where the official
// AG-UI client is installed (npm ci there); without them the test skips,
// unless STUDIO_REQUIRE_AGUI_CLIENT=1 (CI) makes it fail.
func aguiClient(t *testing.T) (node, dir string) {
	t.Helper()
	dir = filepath.Join("..", "..", "checks", "agui-client-check")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client"))
	}
	if err != nil {
		if os.Getenv("STUDIO_REQUIRE_AGUI_CLIENT") == "1" {
			t.Fatalf("the AG-UI client cannot run (node, and npm ci in %s): %v", dir, err)
		}
		t.Skipf("SKIP: node or %s/node_modules/@ag-ui/client missing (npm ci there): %v", dir, err)
	}
	return node, dir
}

// TestProcessAGUIClient: @ag-ui/client's HttpAgent against the built
// binary (checks/agui-client-check), every event validated by
// @ag-ui/core's schemas: a read question streamed, a frontend tool applied
// and acknowledged, a proposal's interrupt resumed with confirm (it
// executes once) and with deny, a reconnect mid-run with the last event
// id (the rest, without gaps or duplicates).
func TestProcessAGUIClient(t *testing.T) {
	t.Parallel()
	node, dir := aguiClient(t)
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, "--model", "script:"+writeScript(t, aguiScript))
	operator := principalToken(t, d, dataDir, "agui-op", protocol.RoleOperator)
	cmd := exec.CommandContext(testCtx(t), node, "check.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STUDIO_URL="+d.URL, "STUDIO_TOKEN="+operator)
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node check.mjs: %v\n%s\n%s", err, raw, d.Logs())
	}
	lines := jsonLines(raw)
	if len(lines) != 1 {
		t.Fatalf("check.mjs answered %s", raw)
	}
	b, _ := json.Marshal(lines[0])
	var out struct {
		Read struct {
			Text  string
			Types []string
		}
		Frontend struct {
			EffectID     string
			Acknowledged []struct{ EffectID, Status string }
		}
		Confirm struct {
			Interrupt struct {
				ID, Reason, Message, ExpiresAt string
				Metadata                       map[string]any
			}
			PendingAfter int
			Status, Text string
		}
		Deny struct {
			Interrupt    string
			PendingAfter int
			Status       string
		}
		Reconnect struct {
			Partial, LastID, Text string
			Types                 []string
		}
		Events       int
		SchemaErrors []any
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("AG-UI client: %s", raw)
	if len(out.SchemaErrors) > 0 || out.Events < 30 {
		t.Fatalf("%d events, schema errors %v", out.Events, out.SchemaErrors)
	}
	if out.Read.Text != "Hello. It audits a repository." || !slices.Contains(out.Read.Types, "TOOL_CALL_RESULT") ||
		out.Read.Types[0] != "RUN_STARTED" || out.Read.Types[len(out.Read.Types)-1] != "RUN_FINISHED" {
		t.Fatalf("read: %+v", out.Read)
	}
	if a := out.Frontend.Acknowledged; len(a) != 1 || a[0].EffectID != out.Frontend.EffectID || a[0].Status != "applied" {
		t.Fatalf("frontend tool: %+v", out.Frontend)
	}
	c := out.Confirm
	if c.Status != "succeeded" || c.PendingAfter != 0 || c.Interrupt.Metadata["commandHash"] == "" || c.Interrupt.ExpiresAt == "" ||
		!strings.Contains(c.Text, "The operator decided.") {
		t.Fatalf("confirm: %+v", c)
	}
	if out.Deny.Status != "cancelled" || out.Deny.PendingAfter != 0 {
		t.Fatalf("deny: %+v", out.Deny)
	}
	if out.Reconnect.Partial != "first " || out.Reconnect.Text != "first second" {
		t.Fatalf("reconnect: %+v", out.Reconnect)
	}
	// The confirmed command ran once: one run of repo x.
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, d.URL+"/api/app/runs?q=repo%20x", nil)
	req.Header.Set("Authorization", "Bearer "+operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var runs struct{ Runs []any }
	if err := json.NewDecoder(resp.Body).Decode(&runs); err != nil || len(runs.Runs) != 1 {
		t.Fatalf("runs of the confirmed command: %d (%v)", len(runs.Runs), err)
	}
}
