package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestProcessConversationCommands drives the conversation commands through the binary: a
// daemon with three models (offline, an OpenAI-compatible server that is
// down, a script), and the CLI's models, fork, search, pin, model choice,
// delete and restore.
func TestProcessConversationCommands(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	scriptPath := writeScript(t, `{"turns":[{"steps":[{"text":"scripted answer"}]}]}`)
	d := startDaemon(t, dataDir, "--model", "offline",
		"--provider", "local=openai,model=llama3.1,base-url=http://127.0.0.1:9/v1,context-tokens=8192",
		"--provider", "scripted=script:"+scriptPath)
	bin, _ := buildBinary()
	run := func(wantOK bool, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--data-dir", dataDir}, args...)...)
		cmd.Env = append(os.Environ(), "STUDIO_URL="+d.URL, "STUDIO_TOKEN=")
		out, err := cmd.CombinedOutput()
		if (err == nil) != wantOK {
			t.Fatalf("studio %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run(true, "operator", "models")
	for _, want := range []string{"offline", "default", "local", "llama3.1", "unreachable", "scripted"} {
		if !strings.Contains(out, want) {
			t.Fatalf("models lacks %q:\n%s", want, out)
		}
	}
	out = run(true, "operator", "conversations", "create", "--title", "nightly triage", "-o", "json")
	conv := regexp.MustCompile(`"id": "([0-9a-f-]{36})"`).FindStringSubmatch(out)[1]
	run(true, "operator", "send", "--conversation", conv, "show failed runs")
	// Fork after the turn; an inner sequence is refused naming the boundaries.
	out = run(true, "operator", "fork", conv, "--title", "what if")
	m := regexp.MustCompile(`forked ` + conv + ` up to #(\d+) into ([0-9a-f-]{36}) \((\d+) frames copied\)`).FindStringSubmatch(out)
	if m == nil || m[1] != m[3] {
		t.Fatalf("fork: %s", out)
	}
	fork := m[2]
	if out := run(false, "operator", "fork", conv, "--up-to", "1"); !strings.Contains(out, "does not end a complete turn") {
		t.Fatalf("fork inside a turn: %s", out)
	}
	// Choose the scripted model for the fork: its next turn uses it.
	run(true, "operator", "conversations", "model", fork, "scripted")
	if out := run(true, "operator", "send", "--conversation", fork, "go on"); !strings.Contains(out, "scripted answer") {
		t.Fatalf("send with the scripted model: %s", out)
	}
	if out := run(false, "operator", "conversations", "model", fork, "nope"); !strings.Contains(out, "not configured") {
		t.Fatalf("unknown model: %s", out)
	}
	// Search finds both by title and by turn text; pinned lists first.
	run(true, "operator", "conversations", "pin", fork)
	out = run(true, "operator", "conversations", "search", "failed runs")
	if !strings.Contains(out, conv) || !strings.Contains(out, fork) {
		t.Fatalf("search: %s", out)
	}
	if out := run(true, "operator", "conversations", "search", "scripted"); !strings.Contains(out, fork) || strings.Contains(out, conv) {
		t.Fatalf("search turn text: %s", out)
	}
	if out := run(true, "operator", "conversations", "list"); strings.Index(out, fork) > strings.Index(out, conv) || !strings.Contains(out, " pinned ") {
		t.Fatalf("list: %s", out)
	}
	// Delete and restore.
	run(true, "operator", "conversations", "delete", conv)
	if out := run(true, "operator", "conversations", "list", "--status", "deleted"); !strings.Contains(out, conv) {
		t.Fatalf("deleted list: %s", out)
	}
	if out := run(true, "operator", "conversations", "restore", conv); !strings.Contains(out, "restored "+conv+" as active") {
		t.Fatalf("restore: %s", out)
	}
	if out := run(false, "operator", "conversations", "restore", conv); !strings.Contains(out, "not deleted") {
		t.Fatalf("restore twice: %s", out)
	}
}
