package main

import (
	"bufio"
	"context"
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

// Deleting studio.lock from under a running daemon does not let a second
// daemon open the same SQLite database: the database file itself is locked.
func TestProcessDeletedLockFileStillKeepsASecondDaemonOut(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	if err := os.Remove(filepath.Join(dataDir, "studio.lock")); err != nil {
		t.Fatal(err)
	}
	bin, _ := buildBinary()
	ctx, cancel := context.WithTimeout(testCtx(t), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir).CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "another studio daemon") {
		t.Fatalf("a second daemon after studio.lock was deleted: %v\n%s", err, out)
	}
	if _, err := d.client.ListConversations(testCtx(t), "", "", 1); err != nil {
		t.Fatalf("the first daemon: %v", err)
	}
}

// openFDs counts a process's open file descriptors (Linux).
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return len(entries)
}

// The --metrics-addr listener has the main listener's edge: a foreign Host
// cannot read the profiles (DNS rebinding), bodies that never come are cut
// off, and a flood of it is capped, so it cannot take the descriptors the
// main listener needs: the main one keeps answering and the daemon's
// descriptors stay bounded.
func TestProcessMetricsListenerIsGuardedAndCapped(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir(), "--metrics-addr", "127.0.0.1:0", "--pprof", "--body-timeout", "1h")
	m := metricsAddrRE.FindStringSubmatch(d.Logs())
	if m == nil {
		t.Fatalf("no metrics address in the logs:\n%s", d.Logs())
	}
	maddr := strings.TrimSuffix(strings.TrimPrefix(m[1], "http://"), "/metrics")
	send := func(addr, head string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second)) // a safety net
		return c, bufio.NewReader(c)
	}
	_, rd := send(maddr, "GET /debug/pprof/goroutine?debug=2 HTTP/1.1\r\nHost: evil.example\r\n\r\n")
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || strings.Contains(string(b), "goroutine") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("foreign Host on the metrics listener: %d %s", resp.StatusCode, b)
	}
	// A foreign Host with a body still to come on the main listener: an
	// answer, and the close, at once, though the body deadline is an hour.
	addr := strings.TrimPrefix(d.URL, "http://")
	_, rd = send(addr, "POST /api/x HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 100\r\n\r\n")
	resp, err = http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != 403 || !resp.Close {
		t.Fatalf("the main listener's refusal: %v %v", resp, err)
	}
	_, _ = io.ReadAll(resp.Body)
	if _, err := rd.ReadByte(); err == nil {
		t.Fatal("the refused connection stayed open")
	}

	base := openFDs(t, d.cmd.Process.Pid)
	// A flood: 300 connections that declare a body and never send it.
	const flood = 300
	refused := 0
	for range flood {
		_, rd := send(maddr, "GET /metrics HTTP/1.1\r\nHost: "+maddr+"\r\nContent-Length: 100\r\n\r\n")
		_ = rd // the daemon's answer, if any, is read below for the refused ones
	}
	grown := openFDs(t, d.cmd.Process.Pid) - base
	// The main listener answers through it.
	for range 20 {
		if code, _ := rawGet(t, d, "/healthz", "", ""); code != 200 {
			t.Fatalf("the main listener during the flood: %d", code)
		}
	}
	// Past the caps the metrics listener refuses with a typed 429, or, while
	// it is writing its most refusals at once, closes at once; the
	// refusals in flight end within their two seconds.
	for deadline := time.Now().Add(60 * time.Second); refused == 0 && time.Now().Before(deadline); {
		c, rd := send(maddr, "GET /metrics HTTP/1.1\r\nHost: "+maddr+"\r\n\r\n")
		if resp, err := http.ReadResponse(rd, nil); err == nil && resp.StatusCode == 429 {
			refused++
		}
		c.Close()
	}
	t.Logf("metrics flood of %d connections: the daemon's descriptors grew by %d (caps: 16 per client, 64 in all, 64 refusals at once)", flood, grown)
	if grown > 64+64+16 {
		t.Errorf("the flood took %d descriptors", grown)
	}
	// The lease kept renewing through it (the daemon's own count, read on
	// the main listener with the token).
	if code, body := rawGet(t, d, "/metrics", "", readToken(t, d.dir)); code != 200 || !strings.Contains(body, "studio_lease_renewal_failures_total 0") {
		t.Errorf("lease renewals failed during the flood: %d %s", code, grepLines(body, "studio_lease"))
	}
	if refused != 1 {
		t.Errorf("a connection past the metrics caps was not refused with 429")
	}
}

// grepLines are the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
