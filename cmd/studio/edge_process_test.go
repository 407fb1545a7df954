package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A fresh data directory and everything the daemon puts in
// it are private to their owner.
func TestProcessFreshDataDirIsPrivate(t *testing.T) {
	t.Parallel()
	parent := filepath.Join(t.TempDir(), "state")
	dataDir := filepath.Join(parent, "studio")
	d := startDaemon(t, dataDir)
	if _, err := d.client.ListConversations(testCtx(t), "", "", 1); err != nil { // the daemon answers: its files exist
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{parent: 0o700, dataDir: 0o700,
		filepath.Join(dataDir, "studio.db"): 0o600, filepath.Join(dataDir, "studio.db-wal"): 0o600,
		filepath.Join(dataDir, "studio.db-shm"): 0o600, filepath.Join(dataDir, "token"): 0o600,
		filepath.Join(dataDir, "studio.lock"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", path, got, want)
		}
	}
	if strings.Contains(d.Logs(), "open to other users") {
		t.Errorf("a private data dir was warned about:\n%s", d.Logs())
	}
}

// A data directory others can read is warned about at
// start and listed by studio doctor.
func TestProcessExposedDataDirIsWarnedAbout(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dataDir)
	if !strings.Contains(d.Logs(), "open to other users") || !strings.Contains(d.Logs(), "chmod 0700") {
		t.Fatalf("no warning at start:\n%s", d.Logs())
	}
	bin, _ := buildBinary()
	cmd := exec.Command(bin, "doctor", "--data-dir", dataDir)
	cmd.Env = append(os.Environ(), "STUDIO_URL="+d.URL, "STUDIO_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "status:     degraded") || !strings.Contains(string(out), "chmod 0700 "+dataDir) {
		t.Fatalf("doctor:\n%s", out)
	}
}

// A second daemon (or migrate) on the same data directory
// exits at once, naming the first one's pid and address; the first keeps
// serving.
func TestProcessSecondDaemonOnTheDataDirIsRefused(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	bin, _ := buildBinary()
	for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0"}, {"migrate"}} {
		ctx, cancel := context.WithTimeout(testCtx(t), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, append(args, "--data-dir", dataDir)...)
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Fatalf("studio %s on a held data dir: %v\n%s", args[0], err, out)
		}
		for _, want := range []string{"pid " + strconv.Itoa(d.cmd.Process.Pid), d.URL, "another studio daemon"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("studio %s says %q, without %q", args[0], out, want)
			}
		}
	}
	if _, err := d.client.ListConversations(testCtx(t), "", "", 1); err != nil {
		t.Fatalf("the first daemon: %v", err)
	}
}

// rawGet sends GET path to the daemon with the given Host and token.
func rawGet(t *testing.T, d *daemon, path, host, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), "GET", d.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The edge against the binary: a foreign Host is refused (and
// --allowed-hosts admits one), and a trickling body is cut off at
// --body-timeout.
func TestProcessHostCheckAndSlowBodies(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, "--allowed-hosts", "studio.example.com", "--body-timeout", "1s")
	token := readToken(t, dataDir)
	port := d.URL[strings.LastIndex(d.URL, ":")+1:]

	// Host header checks (DNS rebinding).
	for _, c := range []struct {
		host, path string
		want       int
	}{
		{"rebind.attacker.example:" + port, "/", 403}, {"rebind.attacker.example:" + port, "/healthz", 403},
		{"rebind.attacker.example:" + port, "/api/operator/routes", 403},
		{"localhost:" + port, "/healthz", 200}, {"studio.example.com", "/api/operator/routes", 200},
	} {
		code, body := rawGet(t, d, c.path, c.host, token)
		if code != c.want || (c.want == 403 && !strings.Contains(body, `"code":"denied"`)) {
			t.Errorf("Host %s %s: %d %s", c.host, c.path, code, body)
		}
	}

	// A slow body with the token: cut off with the typed error, connection closed.
	addr := strings.TrimPrefix(d.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /api/operator/conversations HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+token+
		"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	go func() { // a byte every 200 ms, for longer than any safety net
		for range 600 {
			time.Sleep(200 * time.Millisecond)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	rd := bufio.NewReader(conn)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatalf("slow body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != 400 || json.Unmarshal(b, &body) != nil || body.Error.Code != "validation" {
		t.Fatalf("slow body: %d %s", resp.StatusCode, b)
	}
	if _, err := rd.ReadByte(); err == nil {
		t.Fatal("the slow body's connection stayed open")
	}

}

// One client's connections are capped at --max-client-conns;
// the next is answered with the typed 429 and closed.
func TestProcessConnectionsPerClientAreCapped(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir(), "--max-client-conns", "2") // nothing else connects to it
	addr := strings.TrimPrefix(d.URL, "http://")
	for i := range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		want := 200
		if i == 2 {
			want = 429
		}
		if resp.StatusCode != want || (want == 429 && !strings.Contains(string(b), `"code":"rate_limited"`)) {
			t.Fatalf("connection %d: %d %s", i, resp.StatusCode, b)
		}
	}
}

func readToken(t *testing.T, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
