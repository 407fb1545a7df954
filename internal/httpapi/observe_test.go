package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/metrics"
)

// logLines decodes the JSON log lines written to b.
func logLines(t *testing.T, b *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestObserveAccessLogAndAuthFailures: one access line per request with the
// route pattern and the request id, never the query or the credential; auth
// failures logged at most once per interval, counting the rest.
func TestObserveAccessLogAndAuthFailures(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	h := httpapi.Observe(mux, httpapi.ObserveConfig{
		Logger:  slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: metrics.New(metrics.Build{Version: "test"}),
		Route:   func(r *http.Request) string { _, p := mux.Handler(r); return p },
		Now:     clock,
	})
	get := func(path, token, id string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("User-Agent", "observe-test/1")
		if id != "" {
			req.Header.Set(httpapi.RequestIDHeader, id)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := get("/api/things/7?ticket=s3cret-ticket", "good", "client-id-1"); rec.Code != 200 || rec.Header().Get(httpapi.RequestIDHeader) != "client-id-1" {
		t.Fatalf("ok request: %d, request id %q", rec.Code, rec.Header().Get(httpapi.RequestIDHeader))
	}
	if rec := get("/api/things/8", "bad-token-value", "forged\nline"); rec.Header().Get(httpapi.RequestIDHeader) == "forged\nline" || rec.Header().Get(httpapi.RequestIDHeader) == "" {
		t.Fatalf("a request id with a newline was kept: %q", rec.Header().Get(httpapi.RequestIDHeader))
	}
	advance(time.Second)
	get("/api/things/9", "bad-token-value", "") // within the interval: counted, not logged
	advance(httpapi.AuthLogInterval)
	get("/api/things/10", "bad-token-value", "")
	get("/nowhere", "good", "")

	var access, authFailures []map[string]any
	for _, l := range logLines(t, &logs) {
		switch l["msg"] {
		case "http request":
			access = append(access, l)
		case "auth failure":
			authFailures = append(authFailures, l)
		}
	}
	if len(access) != 5 {
		t.Fatalf("%d access lines, want 5: %v", len(access), access)
	}
	first := access[0]
	if first["route"] != "/api/things/{id}" || first["method"] != "GET" || first["path"] != "/api/things/7" || first["status"] != float64(200) || first["request_id"] != "client-id-1" {
		t.Fatalf("access line %v", first)
	}
	if first["remote"] != "192.0.2.1" || first["user_agent"] != "observe-test/1" {
		t.Fatalf("access line without the remote address and user agent: %v", first)
	}
	if access[4]["route"] != "unmatched" || access[4]["status"] != float64(404) {
		t.Fatalf("unmatched request: %v", access[4])
	}
	if len(authFailures) != 2 || authFailures[0]["suppressed_since_last"] != float64(0) || authFailures[1]["suppressed_since_last"] != float64(1) {
		t.Fatalf("auth failure lines %v", authFailures)
	}
	all := logs.String()
	for _, secret := range []string{"s3cret-ticket", "bad-token-value", "Bearer good"} {
		if strings.Contains(all, secret) {
			t.Fatalf("the log holds %q:\n%s", secret, all)
		}
	}
}

// TestHTTPRouteLabelHasNoMethod: the route label is the path pattern; the
// method is its own label.
func TestHTTPRouteLabelHasNoMethod(t *testing.T) {
	t.Parallel()
	r := metrics.New(metrics.Build{Version: "test"})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/things/{id}", func(http.ResponseWriter, *http.Request) {})
	h := httpapi.Observe(mux, httpapi.ObserveConfig{Logger: slog.New(slog.DiscardHandler), Metrics: r,
		Route: func(req *http.Request) string { _, p := mux.Handler(req); return p }})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/things/7", nil))
	body := scrapeRegistry(r)
	if !strings.Contains(body, `studio_http_requests_total{method="GET",route="/api/things/{id}",status="2xx"} 1`) {
		t.Errorf("the route label repeats the method or is missing:\n%s", grepLines(body, "studio_http_requests_total"))
	}
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func scrapeRegistry(r *metrics.Registry) string {
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
