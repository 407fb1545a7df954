package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// TestProcessPolicyCheckAndStart: `studio policy check` and `studio
// serve --policy` agree: a valid team file is accepted; an invalid one is
// refused by both with its file, line and reason, and the daemon does not
// start.
func TestProcessPolicyCheckAndStart(t *testing.T) {
	t.Parallel()
	good := filepath.Join(t.TempDir(), "team.cedar")
	if b, err := os.ReadFile("../../docs/examples/team-policy.cedar"); err != nil || os.WriteFile(good, b, 0o600) != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.cedar")
	if err := os.WriteFile(bad, []byte("// prod\n\n@id(\"prod\")\nforbid (principal, action == Action::\"confirm\", resource is Proposal)\nwhen { resource.projet == \"prod\" };\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code := runStudio(t, nil, "policy", "check", good, "--second-approver-for", "destructive")
	if code != exitOK || !strings.Contains(out, "ok: 3 policies") {
		t.Fatalf("check of the example: exit %d: %s", code, out)
	}
	const want = `bad.cedar:3: policy "prod": attribute ` + "`projet`" + ` on entity type ` + "`Proposal`" + ` not found`
	_, errOut, code := runStudio(t, nil, "policy", "check", bad)
	if code != exitFailure || !strings.Contains(errOut, want) {
		t.Fatalf("check of a bad file: exit %d: %s", code, errOut)
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--policy", bad)
	cmd.Env = append(os.Environ(), "STUDIO_TOKEN=")
	done := make(chan []byte, 1)
	go func() { b, _ := cmd.CombinedOutput(); done <- b }()
	select {
	case b := <-done:
		if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(string(b), want) {
			t.Fatalf("serve with a bad policy: exit %d: %s", cmd.ProcessState.ExitCode(), b)
		}
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("serve with a bad policy started")
	}
}

// TestProcessPolicyExplain: `studio policy explain` prints the daemon's
// decision and the policies that made it, from flags or from a JSON
// request on stdin; only an admin may ask.
func TestProcessPolicyExplain(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, "--second-approver-for", "destructive")
	ctx := testCtx(t)
	if _, err := d.client.CreatePrincipal(ctx, "alice", protocol.RoleOperator); err != nil {
		t.Fatal(err)
	}
	env := []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}
	out, errOut, code := runStudio(t, env, "policy", "explain", "--principal", "alice", "--action", "run_command",
		"--command", "delete_schedule", "--body", `{"schedule":"nightly-audit"}`)
	if code != exitOK || !strings.Contains(out, "allow_with_obligation (four_eyes_required, second_approver)") ||
		!strings.Contains(out, "second-approver-for (forbid, builtin.cedar:") || !strings.Contains(out, `containsAny(["destructive"])`) {
		t.Fatalf("explain a delete: exit %d: %s %s", code, out, errOut)
	}
	cmd := exec.Command(mustBinary(t), "policy", "explain", "--request", "-", "-o", "json")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(`{"principal":"alice","action":"manage_principals"}`)
	b, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var x policy.Explanation
	if err := json.Unmarshal(b, &x); err != nil || x.Effect != policy.EffectDeny || x.Reason != policy.ReasonRole || x.Needed != protocol.RoleAdmin {
		t.Fatalf("explain from stdin: %v %s", err, b)
	}
	tok, err := d.client.CreateToken(ctx, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runStudio(t, []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=" + tok.Token}, "policy", "explain", "--principal", "alice", "--action", "whoami")
	if code != exitFailure || !strings.Contains(errOut, "denied") {
		t.Fatalf("an operator's explain: exit %d: %s", code, errOut)
	}
}

func mustBinary(t *testing.T) string {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
