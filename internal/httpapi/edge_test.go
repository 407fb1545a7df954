package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/tools"
	"github.com/studio/operator/web"
)

// edgeDaemon is the whole HTTP surface — operator protocol, application API
// and the cockpit page — over a real SQLite file, for the hostile-edge tests.
type edgeDaemon struct {
	t     testing.TB
	api   *httpapi.Server
	srv   *httptest.Server
	store *sqlite.Store
	logs  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newEdgeDaemon(t testing.TB, configure func(*httpapi.Config)) *edgeDaemon {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	if _, err := st.Migrate(context.Background(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	p, err := script.New(script.Greeting)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := studio.New(studio.Config{Store: st, Provider: p, Now: clock.Now, ShutdownGrace: time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	coord := coordinator.New(coordinator.Config{Store: st, Provider: p, Now: clock.Now, ShutdownGrace: time.Millisecond,
		TextFlush: time.Millisecond, Tools: tools.Default(svc, spaces.Default, clock.Now), Logger: quietLogger()})
	page, err := web.New(spaces.Default)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	convs := conversations.New(conversations.Config{Store: st, Engine: coord, Now: clock.Now})
	cfg := withEngine(httpapi.Config{Token: testToken, App: svc, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Extra: []func(*http.ServeMux){page.Register}}, coord, convs)
	if configure != nil {
		configure(&cfg)
	}
	api := httpapi.New(cfg)
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		api.Close()
		srv.Close()
		coord.Shutdown(context.Background())
		svc.Stop(context.Background())
		st.Close()
	})
	return &edgeDaemon{t: t, api: api, srv: srv, store: st, logs: logs}
}

// answer is one HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a raw request; path is sent as written (escapes, dot segments).
func (d *edgeDaemon) do(method, path string, header http.Header, body string) answer {
	d.t.Helper()
	return d.doHost("", method, path, header, body)
}

// doHost is do with another Host header than the server's address.
func (d *edgeDaemon) doHost(host, method, path string, header http.Header, body string) answer {
	d.t.Helper()
	req, err := http.NewRequest(method, d.srv.URL+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	if host != "" {
		req.Host = host
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	// No redirect is followed: a redirect is an answer of its own.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func bearer() http.Header { return http.Header{"Authorization": {"Bearer " + testToken}} }

// typedCode returns the code of a typed protocol error answer, or "" when the
// answer is not one.
func (a answer) typedCode() string {
	if !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		return ""
	}
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(a.body, &body) != nil || body.Error == nil || body.Error.Message == "" {
		return ""
	}
	return body.Error.Code
}

// securityHeaders names a security header every answer lacks.
func (a answer) missingSecurityHeader() string {
	for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
		"Referrer-Policy": "no-referrer", "Content-Security-Policy": "frame-ancestors 'none'"} {
		if !strings.Contains(a.header.Get(h), want) {
			return h
		}
	}
	return ""
}

var wildcard = regexp.MustCompile(`\{[a-z]+\}`)

// routes are the registered patterns as method and path template.
func (d *edgeDaemon) routes() [][2]string {
	var out [][2]string
	for _, p := range httpapi.Patterns(d.api) {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = "GET", p
		}
		out = append(out, [2]string{method, path})
	}
	if len(out) < 40 {
		d.t.Fatalf("only %d routes registered: %v", len(out), out)
	}
	return out
}

// fill replaces the wildcards of a path template: the one at index bad (if
// any) with id, the others with a well-formed id.
func fill(path string, bad int, id string) string {
	i := -1
	return wildcard.ReplaceAllStringFunc(path, func(string) string {
		i++
		if i == bad {
			return id
		}
		return "6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1"
	})
}

func bodyFor(method string) string {
	if method == "POST" || method == "PATCH" {
		return "{}"
	}
	return ""
}

// malformedIDs are path ids no resource can have.
var malformedIDs = map[string]string{
	"invalid UTF-8":          "%ff%fe",
	"truncated UTF-8":        "%c3%28",
	"lone continuation byte": "%80",
	"dot dot":                "..",
	"escaped dot dot":        "%2e%2E",
	"dot":                    ".",
	"NUL":                    "a%00b",
	"newline":                "a%0Ab",
	"escaped slash":          "a%2Fb",
	"overlong":               strings.Repeat("a", 300),
	"overlong escaped":       strings.Repeat("%41", 300),
}

// A table test: every route, every
// malformed id in every id position, answers a typed 400 validation error —
// never a 500, a redirect or a store lookup.
func TestMalformedPathIDsOnEveryRoute(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	checked := 0
	for _, rt := range d.routes() {
		n := len(wildcard.FindAllString(rt[1], -1))
		for pos := range n {
			for name, id := range malformedIDs {
				path := fill(rt[1], pos, id)
				a := d.do(rt[0], path, bearer(), bodyFor(rt[0]))
				checked++
				if a.status != http.StatusBadRequest || a.typedCode() != "validation" {
					t.Errorf("%s %s (%s): %d %s", rt[0], path, name, a.status, a.body)
				}
				if h := a.missingSecurityHeader(); h != "" {
					t.Errorf("%s %s: no %s", rt[0], path, h)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d requests checked", checked)
	}
}

// Dot segments and empty segments in an /api path are a
// typed 400, not the mux's redirect; unknown /api paths are a typed 404.
func TestAPIPathsAlwaysAnswerTyped(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/api/operator/conversations/../routes", 400, "validation"},
		{"GET", "/api/operator/./routes", 400, "validation"},
		{"GET", "/api//operator/routes", 400, "validation"},
		{"GET", "/api/operator/routes/", 400, "validation"},
		{"GET", "/api/../healthz", 400, "validation"},
		{"GET", "/api/operator/routes?q=%ff", 400, "validation"},
		{"GET", "/api/app/playbooks?q=a%00b", 400, "validation"},
		{"GET", "/api/no/such/route", 404, "not_found"},
		{"GET", "/api", 404, "not_found"},
		{"PUT", "/api/operator/conversations", 404, "not_found"},
		{"DELETE", "/api/operator/routes", 404, "not_found"},
	} {
		a := d.do(c.method, c.path, bearer(), "")
		if a.status != c.status || a.typedCode() != c.code {
			t.Errorf("%s %s: %d %q %s, want %d %s", c.method, c.path, a.status, a.header.Get("Location"), a.body, c.status, c.code)
		}
		if h := a.missingSecurityHeader(); h != "" {
			t.Errorf("%s %s: no %s", c.method, c.path, h)
		}
	}
}

// Request headers over the limit get the typed error on
// every route, not net/http's plain-text 431.
func TestOversizedHeadersOnEveryRoute(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	big := strings.Repeat("x", 100<<10)
	for _, rt := range d.routes() {
		path := fill(rt[1], -1, "")
		h := bearer()
		h.Set("X-Padding", big)
		a := d.do(rt[0], path, h, bodyFor(rt[0]))
		if a.status != http.StatusBadRequest || a.typedCode() != "validation" {
			t.Errorf("%s %s with 100 KiB of headers: %d %s", rt[0], path, a.status, a.body)
		}
		if h := a.missingSecurityHeader(); h != "" {
			t.Errorf("%s %s: no %s", rt[0], path, h)
		}
	}
}

// Every answer of the daemon carries the security headers,
// the page's and unknown paths' included.
func TestEveryAnswerCarriesSecurityHeaders(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	for _, c := range []struct {
		method, path string
		auth         bool
	}{
		{"GET", "/", false}, {"GET", "/library", false}, {"GET", "/no/such/page", false}, {"POST", "/", false},
		{"GET", "/healthz", false}, {"GET", "/metrics", false}, {"GET", "/metrics", true},
		{"GET", "/api/operator/routes", false}, {"GET", "/api/operator/routes", true},
		{"GET", "/assets/nope/x.js", false}, {"OPTIONS", "/api/operator/routes", true},
	} {
		var h http.Header
		if c.auth {
			h = bearer()
		}
		a := d.do(c.method, c.path, h, "")
		if m := a.missingSecurityHeader(); m != "" {
			t.Errorf("%s %s (%d): no %s", c.method, c.path, a.status, m)
		}
	}
	// The page keeps its own, stricter-for-scripts policy.
	if csp := d.do("GET", "/", nil, "").header.Get("Content-Security-Policy"); csp != web.ContentSecurityPolicy {
		t.Errorf("page CSP = %q", csp)
	}
}

// A Host that is neither loopback nor allowed is refused
// with the typed error, on the page, the health check and the API alike.
func TestForeignHostIsRefused(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	port := d.srv.URL[strings.LastIndex(d.srv.URL, ":")+1:]
	for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "127.0.0.1.nip.io:" + port, "localhost.attacker.example"} {
		for _, path := range []string{"/", "/healthz", "/api/operator/routes", "/assets/x"} {
			a := d.doHost(host, "GET", path, bearer(), "")
			if a.status != http.StatusForbidden || a.typedCode() != "denied" {
				t.Errorf("Host %s %s: %d %s", host, path, a.status, a.body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST.:" + port, "studio.localhost:" + port, "[::1]:" + port, "127.8.9.10"} {
		if a := d.doHost(host, "GET", "/healthz", nil, ""); a.status != http.StatusOK {
			t.Errorf("Host %s: %d", host, a.status)
		}
	}
}

// The open health check says ok and nothing else.
func TestHealthzSaysOnlyOK(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	a := d.do("GET", "/healthz", nil, "")
	if a.status != 200 || strings.TrimSpace(string(a.body)) != `{"status":"ok"}` {
		t.Fatalf("healthz: %d %s", a.status, a.body)
	}
}

// The largest valid instruction in the worst JSON escaping
// (every character a \uXXXX surrogate pair, 12 bytes) with a large context
// fits the turn body; one character more is refused for its length, and a
// body over the limit is refused as such — all typed.
func TestTurnBodyFitsEveryValidInstruction(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	conv := d.do("POST", "/api/operator/conversations", bearer(), "{}")
	var c struct{ ID string }
	if err := json.Unmarshal(conv.body, &c); err != nil || c.ID == "" {
		t.Fatalf("create: %d %s", conv.status, conv.body)
	}
	turn := func(chars int, filler int) string {
		instruction := strings.Repeat(`\ud83d\ude00`, chars)
		return `{"instruction":"` + instruction + `","expectedLastSequence":0,"context":{"space":"mission","route":"/` +
			strings.Repeat("r", 2000) + `","filters":{"note":"` + strings.Repeat(`\u00e9`, filler) + `"}}}`
	}
	body := turn(32768, 5000)
	if len(body) <= 393216 {
		t.Fatalf("the body is only %d bytes", len(body))
	}
	a := d.do("POST", "/api/operator/conversations/"+c.ID+"/turns", bearer(), body)
	if a.status != http.StatusAccepted {
		t.Fatalf("32 768 escaped emoji (%d bytes): %d %s", len(body), a.status, a.body)
	}
	a = d.do("POST", "/api/operator/conversations/"+c.ID+"/turns", bearer(), turn(32769, 0))
	if a.status != 400 || a.typedCode() != "validation" || !strings.Contains(string(a.body), "characters") {
		t.Fatalf("32 769 characters: %d %s", a.status, a.body)
	}
	a = d.do("POST", "/api/operator/conversations/"+c.ID+"/turns", bearer(), turn(1, 200_000))
	if a.status != 400 || a.typedCode() != "validation" || !strings.Contains(string(a.body), "larger than") {
		t.Fatalf("a 1.2 MB body: %d %s", a.status, a.body)
	}
}

// A NUL in a JSON string is refused at the edge: PostgreSQL cannot store it
// and no name, title or instruction needs it.
func TestNULInBodyIsRefused(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	for _, body := range []string{`{"title":"a\u0000b"}`, `{"title":"\\\u0000"}`} {
		a := d.do("POST", "/api/operator/conversations", bearer(), body)
		if a.status != 400 || a.typedCode() != "validation" {
			t.Errorf("%s: %d %s", body, a.status, a.body)
		}
	}
	// An escaped backslash followed by the text u0000 is no NUL.
	if a := d.do("POST", "/api/operator/conversations", bearer(), `{"title":"a\\u0000b"}`); a.status != 201 {
		t.Errorf(`title a\u0000b: %d %s`, a.status, a.body)
	}
}

// A response that cannot be encoded (here a title that is
// not UTF-8, written past the API's validation) is logged at ERROR and
// answered with the typed 503, never a bare 500.
func TestUnencodableResponseIsLoggedAnd503(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	title := "bad \xff title"
	const id = "0b7c3c1e-2d6f-4a51-9e0d-6f3b2a1c9d8e"
	if _, err := d.store.CreateConversation(t.Context(), store.CreateConversationParams{ID: id, Title: &title, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	a := d.do("GET", "/api/operator/conversations/"+id, bearer(), "")
	if a.status != http.StatusServiceUnavailable || a.typedCode() != "service_failure" {
		t.Fatalf("answer %d %s", a.status, a.body)
	}
	if logs := d.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "encode response") {
		t.Fatalf("logs: %s", logs)
	}
}

// --allowed-hosts: the names a proxy forwards are answered, subdomain
// wildcards included; others still are not.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, func(c *httpapi.Config) { c.AllowedHosts = []string{"studio.example.com", "*.corp.example"} })
	for host, want := range map[string]int{"studio.example.com": 200, "STUDIO.example.com.:443": 200, "a.b.corp.example": 200,
		"corp.example": 403, "evil.example.com": 403, "studio.example.com.evil": 403} {
		if a := d.doHost(host, "GET", "/healthz", nil, ""); a.status != want {
			t.Errorf("Host %s: %d, want %d", host, a.status, want)
		}
	}
}

// rawRequest writes a request's head on a new connection and returns the
// connection and a reader of its answers.
func rawRequest(t *testing.T, addr, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// A body that trickles in is cut off at the body deadline,
// with the token or without: the answer is typed and the connection closes.
func TestSlowBodiesAreCutOff(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, func(c *httpapi.Config) { c.BodyTimeout = 300 * time.Millisecond })
	addr := strings.TrimPrefix(d.srv.URL, "http://")
	for _, c := range []struct {
		name, auth string
		status     int
	}{
		{"with the token", "Authorization: Bearer " + testToken + "\r\n", 400},
		{"without a token", "", 401},
	} {
		conn, rd := rawRequest(t, addr, "POST /api/operator/conversations HTTP/1.1\r\nHost: "+addr+"\r\n"+c.auth+
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		// Trickle a byte now and then until the server answers; the safety
		// net is generous, the deadline is what ends it.
		go func() {
			for range 600 {
				time.Sleep(100 * time.Millisecond)
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := answer{status: resp.StatusCode, header: resp.Header, body: b}
		if a.status != c.status || a.typedCode() == "" {
			t.Errorf("%s: %d %s", c.name, a.status, b)
		}
		if c.status == 400 && !strings.Contains(string(b), "in time") {
			t.Errorf("%s: %s", c.name, b)
		}
		// The server closes the connection: nothing more is read from it.
		if _, err := rd.ReadByte(); err == nil {
			t.Errorf("%s: the connection stayed open", c.name)
		}
	}
}

// The body deadline never cuts a stream, nor a request whose body is read.
func TestStreamsOutliveTheBodyDeadline(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, func(c *httpapi.Config) {
		c.BodyTimeout = 50 * time.Millisecond
		c.Heartbeat = 20 * time.Millisecond
	})
	conv := d.do("POST", "/api/operator/conversations", bearer(), "{}")
	var c struct{ ID string }
	if err := json.Unmarshal(conv.body, &c); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", d.srv.URL+"/api/operator/conversations/"+c.ID+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	// Twenty heartbeats take 400 ms, eight body deadlines.
	for beats := 0; beats < 20; {
		if !sc.Scan() {
			t.Fatalf("the stream ended after %d heartbeats: %v", beats, sc.Err())
		}
		if sc.Text() == ": heartbeat" {
			beats++
		}
	}
}
