package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// signInLine runs `studio serve` with stdout on a pipe (as under systemd or
// docker) and returns the line it prints there and the token.
func signInLine(t *testing.T, extra ...string) (line, token string) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--no-seed"}, extra...)...)
	cmd.Env = append(os.Environ(), "STUDIO_TOKEN=", "STUDIO_PRINT_TOKEN_URL=")
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "Studio cockpit: ") {
			line = sc.Text()
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if line == "" {
		t.Fatal("the daemon printed no sign-in line on stdout")
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return line, strings.TrimSpace(string(b))
}

func TestProcessSignInURLOmitsTheTokenWhenStdoutIsNotATerminal(t *testing.T) {
	t.Parallel()
	line, token := signInLine(t)
	if strings.Contains(line, token) || strings.Contains(line, "#token=") {
		t.Fatalf("stdout is a pipe (a journal keeps it), yet the sign-in line holds the token: %q", line)
	}
	if !strings.Contains(line, "http://127.0.0.1:") || !strings.Contains(line, "studio token") {
		t.Fatalf("the sign-in line %q should name the address and `studio token`", line)
	}
}

func TestProcessPrintTokenURLForcesTheTokenOnAPipe(t *testing.T) {
	t.Parallel()
	line, token := signInLine(t, "--print-token-url")
	if !strings.Contains(line, "/#token="+token) {
		t.Fatalf("--print-token-url: the sign-in line %q lacks the token", line)
	}
}
