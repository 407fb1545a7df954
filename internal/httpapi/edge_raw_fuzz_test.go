package httpapi_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/metrics"
)

// rawEdgeSeeds are requests the edge must answer typed or refuse: the
// hostile ones of the sweeps, and a few well-formed ones.
var rawEdgeSeeds = []string{
	"POST /api/x HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 100\r\n\r\n",
	"GET //api/app/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"GET /x/../api/app/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"GET /./api HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"GET /assets HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc",
	"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"GET /debug/pprof/goroutine?debug=2 HTTP/1.1\r\nHost: evil.example\r\n\r\n",
	"POST /api/operator/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: bearer " + testToken + "\r\nContent-Type: APPLICATION/JSON\r\nContent-Length: 2\r\n\r\n{}",
	"POST /api/operator/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n",
	"GET /api/operator/conversations/%ff%fe/stream?after_sequence=x&ticket=t&token=u HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"GET /api/app/playbooks/sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"GET /\x00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"HEAD /library HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
	"DELETE /library HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\n",
	"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n",
	"CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	"garbage\r\n\r\n",
}

// FuzzEdgeRawBytes writes raw bytes to both real listeners of a daemon —
// the main one (operator protocol, application API, page) and the metrics
// one — and half-closes. Whatever the bytes, every answer the daemon's
// handlers give carries the security headers, none is a redirect or a
// 500, every error is typed JSON (net/http's own refusals of what it
// cannot parse as HTTP are the only plain ones), and the daemon closes the
// connection once the client has nothing more to send. The seeds run in
// every go test.
func FuzzEdgeRawBytes(f *testing.F) {
	for _, s := range rawEdgeSeeds {
		f.Add([]byte(s))
	}
	edge := newRawEdge(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkRawAnswer(t, edge.main, raw)
		checkRawAnswer(t, edge.metrics, raw)
	})
}

// rawEdge is the two listeners of a daemon under the fuzz target.
type rawEdge struct {
	main, metrics string
}

// checkRawAnswer sends raw to addr, half-closes, and checks every answer.
func checkRawAnswer(t *testing.T, addr string, raw []byte) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second)) // a safety net: the daemon closes far sooner
	go func() {
		_, _ = conn.Write(raw)
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	rd := bufio.NewReader(conn)
	// The first request's method tells how to read its answer (HEAD: no body).
	head := &http.Request{Method: http.MethodGet}
	if m, _, ok := strings.Cut(string(raw), " "); ok && m == http.MethodHead {
		head.Method = m
	}
	for {
		resp, err := http.ReadResponse(rd, head)
		if err != nil {
			break
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		a := answer{status: resp.StatusCode, header: resp.Header, body: b}
		plain := a.missingSecurityHeader() != ""
		switch {
		case plain && (resp.StatusCode == 400 || resp.StatusCode == 431 || resp.StatusCode == 501 || resp.StatusCode == 505) && resp.Close:
			// net/http's own refusal of bytes that are not a request it
			// can parse: written before any handler, then the close.
		case plain:
			t.Fatalf("%q: an answer without the security headers: %d %v %s", raw, resp.StatusCode, resp.Header, b)
		case resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.StatusCode != 304:
			t.Fatalf("%q: a redirect: %d %v", raw, resp.StatusCode, resp.Header)
		case resp.StatusCode >= 400 && head.Method == http.MethodHead:
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%q: an untyped error to HEAD: %d %v", raw, resp.StatusCode, resp.Header)
			}
		case resp.StatusCode >= 400 && a.typedCode() == "":
			t.Fatalf("%q: an untyped error: %d %s", raw, resp.StatusCode, b)
		case resp.StatusCode == 500:
			t.Fatalf("%q: a 500: %s", raw, b)
		}
	}
	// The daemon closes the connection: nothing more arrives, and the read
	// ends with EOF (or a reset), not the safety net.
	_, err = io.Copy(io.Discard, rd)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%q: the connection stayed open", raw)
	}
}

// newRawEdge starts both listeners of a daemon on loopback with the
// daemon's http.Servers and caps, for the fuzz target.
func newRawEdge(t testing.TB) rawEdge {
	d := newEdgeDaemon(t, func(c *httpapi.Config) { c.BodyTimeout = 2 * time.Second })
	log := slog.New(slog.DiscardHandler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.NewHTTPServer(d.api.Observed(), log)
	go srv.Serve(httpapi.LimitConns(ln, 0, httpapi.DefaultMaxConns))
	t.Cleanup(func() { srv.Close() })
	reg := metrics.New(metrics.Build{Version: "test"})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	mux.HandleFunc("GET /debug/pprof/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "profile") })
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	msrv := httpapi.NewMetricsServer(httpapi.Guard(mux, httpapi.EdgeConfig{BodyTimeout: 2 * time.Second, Logger: log}), log)
	go msrv.Serve(httpapi.LimitConns(mln, httpapi.MetricsMaxClientConns, httpapi.MetricsMaxConns))
	t.Cleanup(func() { msrv.Close() })
	return rawEdge{main: ln.Addr().String(), metrics: mln.Addr().String()}
}
