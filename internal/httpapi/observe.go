package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/redact"
)

// Observed wraps the server with the access log and the HTTP metrics: one
// log line and one sample per request, labelled with the route pattern that
// matched (never the raw path of an id, never the query, which may hold a
// stream ticket). Bodies and the Authorization header are never logged.
// Auth failures are counted and logged at most once per AuthLogInterval,
// with the number left out since the last line.
func (s *Server) Observed() http.Handler {
	return Observe(s, ObserveConfig{Logger: s.log, Metrics: s.metrics.reg, Route: s.Route})
}

// Route is the pattern of the route r matches ("GET /api/app/runs/{id}"),
// or "" when none does. Logs and metrics carry it without the method.
func (s *Server) Route(r *http.Request) string {
	_, pattern := s.mux.Handler(r)
	return pattern
}

// AuthLogInterval is the least time between two auth failure log lines.
const AuthLogInterval = 10 * time.Second

// ObserveConfig configures Observe.
type ObserveConfig struct {
	Logger  *slog.Logger
	Metrics *metrics.Registry
	// Route names the route pattern a request matched; "" is "unmatched".
	Route func(*http.Request) string
	// Now is the clock of the auth failure limiter (default time.Now).
	Now func() time.Time
}

// RequestIDHeader carries the request id: a client's own (when it is short
// and plain) or one made here; it is echoed on the response and logged.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// requestIDOf is the id of the request ctx belongs to, if Observe saw it.
func requestIDOf(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// Observe is the access log and HTTP metrics middleware (see Observed).
func Observe(next http.Handler, cfg ObserveConfig) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	limiter := &logLimiter{every: AuthLogInterval, now: cfg.Now}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := clientRequestID(r.Header.Get(RequestIDHeader))
		if id == "" {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		route := "unmatched"
		if cfg.Route != nil {
			if p := routePath(cfg.Route(r)); p != "" {
				route = p
			}
		}
		d := time.Since(start)
		stream := strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream")
		cfg.Metrics.HTTPRequest(r.Method, route, status, d, stream)
		level := slog.LevelInfo
		if quietRoute(route) {
			level = slog.LevelDebug
		}
		cfg.Logger.LogAttrs(r.Context(), level, "http request",
			slog.String("method", r.Method), slog.String("route", route), slog.String("path", logPath(r.URL.Path)),
			slog.Int("status", status), slog.Duration("duration", d), slog.String("request_id", id),
			slog.String("remote", remoteHost(r)), slog.String("user_agent", userAgent(r)))
		if status == http.StatusUnauthorized {
			cfg.Metrics.AuthFailure()
			if ok, suppressed := limiter.allow(); ok {
				cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "auth failure",
					slog.String("route", route), slog.String("remote", remoteHost(r)), slog.String("request_id", id),
					slog.Int64("suppressed_since_last", suppressed))
			}
		}
	})
}

// routePath is a route pattern without its method ("GET /api/x/{id}"
// becomes "/api/x/{id}"): the method is a label and a field of its own.
func routePath(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return pattern
}

// quietRoute reports routes whose requests are logged at DEBUG: scrapers
// and health checks call every few seconds, and a cockpit page load fetches
// dozens of static assets.
func quietRoute(route string) bool {
	return route == "/healthz" || route == "/readyz" || route == "/metrics" || strings.HasPrefix(route, "/assets/")
}

// maxUserAgent bounds the user agent a log line carries.
const maxUserAgent = 200

// userAgent is the request's User-Agent, cut short; slog quotes it, so it
// cannot forge a line.
func userAgent(r *http.Request) string {
	ua := r.UserAgent()
	if len(ua) > maxUserAgent {
		ua = ua[:maxUserAgent]
	}
	return ua
}

// statusRecorder remembers the status a handler wrote. Unwrap lets
// http.ResponseController reach the connection (flushes, deadlines).
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// clientRequestID accepts a client's id of up to 64 letters, digits, '-',
// '_' or '.', so a log line cannot be forged or bloated through it.
func clientRequestID(v string) string {
	if v == "" || len(v) > 64 {
		return ""
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return ""
		}
	}
	return v
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// logPath is a request path as the access log shows it: each segment that
// holds a secret (a key pasted into a URL: /api/app/playbooks/sk-proj-…)
// replaced whole by the redactor's marker. The query is never logged.
func logPath(p string) string {
	segs := strings.Split(p, "/")
	changed := false
	for i, seg := range segs {
		if seg != "" && redact.Text(seg) != seg {
			segs[i], changed = redact.Secret, true
		}
	}
	if !changed {
		return p
	}
	return strings.Join(segs, "/")
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// logLimiter lets one event through per interval and counts the rest.
type logLimiter struct {
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int64
}

// allow reports whether to log now, and how many were suppressed before.
func (l *logLimiter) allow() (bool, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return true, n
}
