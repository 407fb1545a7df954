package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/metrics"
)

// readAnswer reads one answer from rd, with a safety net far above what a
// bounded connection takes. A Connection: close (which ReadResponse takes
// out of the header into resp.Close) is put back in the header.
func readAnswer(t *testing.T, conn net.Conn, rd *bufio.Reader) answer {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Close {
		resp.Header.Set("Connection", "close")
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// closedAfter reports whether the server closed the connection after its
// answer (the safety net is far above the deadlines in play).
func closedAfter(conn net.Conn, rd *bufio.Reader) bool {
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	_, err := rd.ReadByte()
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// A request the edge refuses (Host, header size, path) or a handler refuses
// before reading the body (no token) is answered at once, with Connection:
// close, and the connection closes: the refusal never waits for a body
// that does not come. The body deadline is ten minutes, so only a refusal
// that does not wait passes.
func TestRefusalsDoNotWaitForTheBody(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, func(c *httpapi.Config) { c.BodyTimeout = 10 * time.Minute })
	addr := strings.TrimPrefix(d.srv.URL, "http://")
	big := "X-Big: " + strings.Repeat("a", httpapi.HeaderLimit) + "\r\n"
	for name, c := range map[string]struct {
		head   string
		status int
	}{
		"foreign host":   {"POST /api/x HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 100\r\n\r\n", 403},
		"large headers":  {"POST /api/operator/conversations HTTP/1.1\r\nHost: " + addr + "\r\n" + big + "Content-Length: 100\r\n\r\n", 400},
		"bad path":       {"POST /api/operator/conversations/%ff HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 100\r\n\r\n", 400},
		"dot path":       {"POST /x/../api/operator/conversations HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 100\r\n\r\n", 400},
		"no token":       {"POST /api/operator/conversations HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 100\r\n\r\n", 401},
		"no such route":  {"POST /nowhere HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 100\r\n\r\n", 404},
		"chunked, no tk": {"POST /api/operator/conversations HTTP/1.1\r\nHost: " + addr + "\r\nTransfer-Encoding: chunked\r\n\r\n", 401},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn, rd := rawRequest(t, addr, c.head)
			a := readAnswer(t, conn, rd)
			if a.status != c.status || a.typedCode() == "" {
				t.Fatalf("%d %s", a.status, a.body)
			}
			if a.header.Get("Connection") != "close" {
				t.Errorf("Connection: %q, want close", a.header.Get("Connection"))
			}
			if !closedAfter(conn, rd) {
				t.Error("the connection stayed open after the refusal")
			}
		})
	}
}

// A request whose handler answers without reading its body is still bound
// by the body deadline: net/http's read of what is left stops at it and the
// connection closes.
func TestUnreadBodiesAreBoundByTheDeadline(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, func(c *httpapi.Config) { c.BodyTimeout = 200 * time.Millisecond })
	addr := strings.TrimPrefix(d.srv.URL, "http://")
	conn, rd := rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 100\r\n\r\n")
	if a := readAnswer(t, conn, rd); a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if !closedAfter(conn, rd) {
		t.Error("the connection stayed open")
	}
}

// The paths the mux would redirect or answer in plain text, and OPTIONS *,
// answer typed JSON errors, never a redirect.
func TestUncleanPathsAndUnservedRequestsAnswerTyped(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	addr := strings.TrimPrefix(d.srv.URL, "http://")
	for _, c := range []struct {
		method, target string
		status         int
	}{
		{"GET", "//api/app/runs", 400},
		{"GET", "/x/../api/app/runs", 400},
		{"GET", "/./api", 400},
		{"GET", "/api/app/./runs", 400},
		{"GET", "//", 400},
		{"GET", "/library/../healthz", 400},
		{"GET", "/assets", 404},            // the mux would redirect to /assets/
		{"GET", "/no/such/page", 404},      // the mux's plain-text 404
		{"POST", "/healthz", 404},          // the mux's plain-text 405
		{"DELETE", "/library", 404},        // the page's method
		{"GET", "/assets/nothing.js", 404}, // the asset handler's own 404
	} {
		conn, rd := rawRequest(t, addr, c.method+" "+c.target+" HTTP/1.1\r\nHost: "+addr+"\r\n"+
			"Authorization: Bearer "+testToken+"\r\nContent-Length: 0\r\n\r\n")
		a := readAnswer(t, conn, rd)
		conn.Close()
		if a.status != c.status || a.typedCode() == "" || a.header.Get("Location") != "" || a.missingSecurityHeader() != "" {
			t.Errorf("%s %s: %d %v %s", c.method, c.target, a.status, a.header, a.body)
		}
	}
	// OPTIONS * reaches the edge on the daemon's http.Server (net/http's
	// own answer is an empty 200 or 400).
	srv := httptest.NewUnstartedServer(d.api)
	srv.Config = httpapi.NewHTTPServer(d.api, slog.New(slog.DiscardHandler))
	srv.Start()
	t.Cleanup(srv.Close)
	saddr := srv.Listener.Addr().String()
	conn, rd := rawRequest(t, saddr, "OPTIONS * HTTP/1.1\r\nHost: "+saddr+"\r\n\r\n")
	if a := readAnswer(t, conn, rd); a.status != 400 || a.typedCode() != "validation" || a.missingSecurityHeader() != "" {
		t.Errorf("OPTIONS *: %d %v %s", a.status, a.header, a.body)
	}
	// A clean path is served as before.
	if a := d.do("GET", "/api/app/runs", bearer(), ""); a.status != 200 {
		t.Errorf("GET /api/app/runs: %d %s", a.status, a.body)
	}
	if a := d.do("GET", "/library", nil, ""); a.status != 200 {
		t.Errorf("GET /library: %d", a.status)
	}
}

// A stream's client that closes its connection frees the connection slot at
// once (its stream notices the close), not at its next heartbeat: with an
// hour between heartbeats and two slots, closing and reopening streams from
// one address never stays refused.
func TestClosedStreamsFreeTheirSlotAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{heartbeat: time.Hour})
	c := h.conversation()
	srv := httptest.NewUnstartedServer(h.api)
	srv.Listener = httpapi.LimitPerClient(srv.Listener, 2)
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	open := func() (net.Conn, answer, bool) {
		conn, rd := rawRequest(t, addr, "GET /api/operator/conversations/"+c.ID+"/stream HTTP/1.1\r\nHost: "+addr+"\r\n"+
			"Authorization: Bearer "+testToken+"\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			conn.Close()
			return nil, answer{status: resp.StatusCode, body: b}, false
		}
		line, err := rd.ReadString('\n') // the stream is live
		if err != nil || !strings.HasPrefix(line, "retry:") {
			t.Fatalf("stream opened with %q: %v", line, err)
		}
		return conn, answer{status: 200}, true
	}
	refused := 0
	deadline := time.Now().Add(60 * time.Second) // a safety net: the slot is freed in a moment
	for i := 0; i < 40; i++ {
		conn, a, ok := open()
		for !ok {
			if a.status != 429 || time.Now().After(deadline) {
				t.Fatalf("stream %d: %d %s (%d refusals so far)", i, a.status, a.body, refused)
			}
			refused++
			conn, a, ok = open()
		}
		conn.Close()
	}
	t.Logf("40 streams opened and closed on 2 slots; %d refusals while a closed stream's slot was being freed", refused)
}

// The metrics listener's edge (Guard) is the main listener's: Host
// allow-list, security headers, typed answers for what it does not serve,
// the body deadline.
func TestMetricsGuardIsTheMainEdge(t *testing.T) {
	t.Parallel()
	reg := metrics.New(metrics.Build{Version: "test"})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	mux.HandleFunc("GET /debug/pprof/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "goroutine profile") })
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = httpapi.NewMetricsServer(httpapi.Guard(mux, httpapi.EdgeConfig{BodyTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Errors: reg.HTTPError}), slog.New(slog.DiscardHandler))
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	ask := func(head string) (answer, bool) {
		conn, rd := rawRequest(t, addr, head)
		a := readAnswer(t, conn, rd)
		return a, closedAfter(conn, rd)
	}
	if a, _ := ask("GET /debug/pprof/goroutine?debug=2 HTTP/1.1\r\nHost: evil.example\r\n\r\n"); a.status != 403 || a.typedCode() != "denied" ||
		strings.Contains(string(a.body), "goroutine") {
		t.Errorf("foreign Host: %d %s", a.status, a.body)
	}
	for _, target := range []string{"GET /metrics", "GET /nothing", "POST /metrics", "GET //metrics", "OPTIONS *"} {
		a, _ := ask(target + " HTTP/1.1\r\nHost: " + addr + "\r\nConnection: close\r\n\r\n")
		if miss := a.missingSecurityHeader(); miss != "" {
			t.Errorf("%s: no %s", target, miss)
		}
		if target != "GET /metrics" && a.typedCode() == "" {
			t.Errorf("%s: untyped %d %s", target, a.status, a.body)
		}
	}
	// A body that never comes holds the connection only until the deadline.
	if a, closed := ask("GET /metrics HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 100\r\n\r\n"); a.status != 200 || !closed {
		t.Errorf("an unsent body: %d, closed %v", a.status, closed)
	}
}

// Exhausting the metrics listener's connections does not starve the main
// listener: the metrics one refuses past its caps, the main one answers.
func TestExhaustedMetricsListenerLeavesTheMainOneServing(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	reg := metrics.New(metrics.Build{Version: "test"})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	msrv := httpapi.NewMetricsServer(httpapi.Guard(mux, httpapi.EdgeConfig{Logger: slog.New(slog.DiscardHandler)}), slog.New(slog.DiscardHandler))
	go msrv.Serve(httpapi.LimitConns(ln, 0, 8))
	t.Cleanup(func() { msrv.Close() })
	maddr := ln.Addr().String()
	// Eight connections that send half a request hold the listener's eight
	// slots (until the read-header timeout).
	for range 8 {
		conn, err := net.Dial("tcp", maddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	refused := 0
	for range 50 {
		conn, rd := rawRequest(t, maddr, "GET /metrics HTTP/1.1\r\nHost: "+maddr+"\r\n\r\n")
		a := readAnswer(t, conn, rd)
		conn.Close()
		if a.status == 429 && a.typedCode() == "rate_limited" {
			refused++
		}
		if main := d.do("GET", "/healthz", nil, ""); main.status != 200 {
			t.Fatalf("the main listener: %d", main.status)
		}
	}
	// Slots freed by the accept loop's count race with nothing here: the
	// eight holders are still open, so every further connection is refused.
	if refused != 50 {
		t.Fatalf("%d of 50 connections past the cap were refused", refused)
	}
	var body struct{ Status string }
	if err := json.Unmarshal(d.do("GET", "/healthz", nil, "").body, &body); err != nil || body.Status != "ok" {
		t.Fatalf("healthz: %v %v", body, err)
	}
}
