package web_test

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestNodeUnitTests runs the cockpit's JavaScript unit tests (node --test
// web/test/) so that `go test ./...` covers them. Without node on PATH it
// skips, saying so.
func TestNodeUnitTests(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("SKIP: node is not on PATH, so the cockpit's JavaScript unit tests (web/test/) did not run; install Node.js 20+ to run them")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "test/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test test/: %v\n%s", err, out)
	}
	t.Logf("node --test test/ passed:\n%s", tail(string(out), 12))
}

func tail(s string, lines int) string {
	n := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n++; n > lines {
				return s[i+1:]
			}
		}
	}
	return s
}
