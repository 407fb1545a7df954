package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestProcessTeamCLI drives principals, tokens and whoami with the built
// binary against a real daemon: the data directory's token is the admin
// owner's; a new principal's token works at once, its role limits it, and
// revoking it refuses it at once.
func TestProcessTeamCLI(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	owner := []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}
	run := func(env []string, want int, args ...string) string {
		t.Helper()
		out, errOut, code := runStudio(t, env, args...)
		if code != want {
			t.Fatalf("studio %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	if out := run(owner, exitOK, "whoami"); strings.TrimSpace(out) != "owner (admin, local)" {
		t.Fatalf("whoami with the token file: %q", out)
	}
	run(owner, exitOK, "principals", "add", "alice", "--role", "viewer")
	run(owner, exitUsage, "principals", "add", "bob", "--role", "root")
	run(owner, exitConflict, "principals", "add", "alice", "--role", "viewer")
	run(owner, exitConflict, "principals", "add", "ALICE", "--role", "viewer") // alice's name, in its PRECIS form
	if out := run(owner, exitFailure, "principals", "add", "\u212Aalice", "--role", "viewer"); !strings.Contains(out, "U+212A") {
		t.Fatalf("a name with a Kelvin sign: %s", out)
	}
	run(owner, exitConflict, "principals", "add", "a1ice", "--role", "viewer") // looks like alice
	var tok struct {
		ID, Token, Prefix, Principal string
	}
	if err := json.Unmarshal([]byte(run(owner, exitOK, "tokens", "create", "alice", "--expires", "90d", "-o", "json")), &tok); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Token, "stu_") || tok.Principal != "alice" || !strings.HasPrefix(tok.Token, tok.Prefix) {
		t.Fatalf("token %+v", tok)
	}
	list := run(owner, exitOK, "tokens", "list", "--principal", "alice")
	if !strings.Contains(list, tok.Prefix) || strings.Contains(list, tok.Token) {
		t.Fatalf("tokens list shows the prefix, never the token:\n%s", list)
	}
	alice := []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=" + tok.Token, "STUDIO_DATA_DIR=" + dataDir}
	if out := run(alice, exitOK, "whoami"); strings.TrimSpace(out) != "alice (viewer, local)" {
		t.Fatalf("whoami as alice: %q", out)
	}
	// --token wins over STUDIO_TOKEN.
	if out := run(owner, exitOK, "whoami", "--token", tok.Token); strings.TrimSpace(out) != "alice (viewer, local)" {
		t.Fatalf("whoami --token: %q", out)
	}
	// A viewer reads but does not manage principals: 403 denied naming admin.
	run(alice, exitOK, "runs", "list")
	if out := run(alice, exitFailure, "principals", "list"); !strings.Contains(out, "admin") {
		t.Fatalf("a viewer's principals list: %s", out)
	}
	run(owner, exitOK, "principals", "role", "alice", "admin")
	if out := run(alice, exitOK, "principals", "list"); !strings.Contains(out, "alice") || !strings.Contains(out, "owner") {
		t.Fatalf("principals list:\n%s", out)
	}
	run(owner, exitOK, "tokens", "revoke", tok.ID)
	if out := run(alice, exitFailure, "whoami"); !strings.Contains(out, "token") {
		t.Fatalf("a revoked token: %s", out)
	}
	run(owner, exitOK, "principals", "revoke", "alice")
	if out := run(owner, exitOK, "principals", "list"); !strings.Contains(out, "revoked") {
		t.Fatalf("principals list after revoke:\n%s", out)
	}
	run(owner, exitConflict, "principals", "revoke", "owner") // the last admin
	if out := run(owner, exitUsage, "serve", "--second-approver-for", "execute,nope", "--data-dir", t.TempDir()); !strings.Contains(out, "nope") {
		t.Fatalf("a bad --second-approver-for: %s", out)
	}
}
