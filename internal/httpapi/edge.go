package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/studio/operator/internal/protocol"
)

// The edge: what every request passes before the mux routes it
// (docs/design.md §16; docs/api.md, "The HTTP edge"). Each check is one
// middleware, so that others (request logging, metrics) compose with them.

const (
	// HeaderLimit bounds a request's headers: above it the answer is a typed
	// validation error. net/http refuses far larger headers itself, before
	// any handler, with a plain-text 431 that cannot be typed (MaxHeaderBytes).
	HeaderLimit = 64 << 10
	// MaxHeaderBytes is http.Server.MaxHeaderBytes for the daemon: what
	// net/http reads of a request's headers at most.
	MaxHeaderBytes = 256 << 10
	// DefaultBodyTimeout is how long a request body may take to arrive.
	DefaultBodyTimeout = 30 * time.Second

	// maxPathSegment bounds one segment of an /api path: ids are UUIDs and
	// names have at most 64 characters.
	maxPathSegment = 256
	maxAPIPath     = 2048
)

// edge wraps the mux in the server's middleware, outermost first. The body
// deadline comes first, so that no refusal waits for a body without one.
func (s *Server) edge(next http.Handler) http.Handler {
	g := &guard{allowedHosts: s.cfg.AllowedHosts, bodyTimeout: s.cfg.BodyTimeout, refuse: s.writeError}
	return s.withLogger(g.wrap(s.checkAPIRequest(typedFallback(next, s.refuseUnknown))))
}

// refuseUnknown answers what the mux does not serve: a browser's page
// request outside /api gets the cockpit's not-found page when there is
// one, everything else the typed error.
func (s *Server) refuseUnknown(w http.ResponseWriter, r *http.Request, err error) {
	if s.cfg.NotFoundPage != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) && !isAPI(r.URL.Path) &&
		protocol.ErrorOf(err).Code == protocol.NotFound && strings.Contains(r.Header.Get("Accept"), "text/html") {
		s.cfg.NotFoundPage(w, r)
		return
	}
	s.writeError(w, r, err)
}

// guard is the edge every listener of the daemon shares: body deadline,
// security headers, Host allow-list, header limit, canonical paths. refuse
// writes its typed errors.
type guard struct {
	allowedHosts []string
	bodyTimeout  time.Duration
	refuse       func(w http.ResponseWriter, r *http.Request, err error)
}

func (g *guard) wrap(next http.Handler) http.Handler {
	return g.bodyDeadline(securityHeaders(g.checkHost(g.limitHeaders(g.canonicalPath(next)))))
}

// EdgeConfig configures Guard.
type EdgeConfig struct {
	// AllowedHosts as in Config.
	AllowedHosts []string
	// BodyTimeout as in Config (default DefaultBodyTimeout).
	BodyTimeout time.Duration
	Logger      *slog.Logger
	// Errors, when set, counts the typed errors by code.
	Errors func(code string)
}

// Guard puts the daemon's edge in front of a handler served on a listener of
// its own (the --metrics-addr one): the same body deadline, security
// headers, Host allow-list (DNS rebinding), header limit and canonical paths
// as the main listener, and typed answers for what the handler's mux does
// not serve (404, 405, redirects).
func Guard(next http.Handler, cfg EdgeConfig) http.Handler {
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	refuse := func(w http.ResponseWriter, r *http.Request, err error) {
		pe := protocol.ErrorOf(err)
		if cfg.Errors != nil {
			cfg.Errors(string(pe.Code))
		}
		writeErrorBody(w, r, pe)
	}
	g := &guard{allowedHosts: cfg.AllowedHosts, bodyTimeout: cfg.BodyTimeout, refuse: refuse}
	h := g.wrap(typedFallback(next, refuse))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&loggingWriter{ResponseWriter: w, log: cfg.Logger}, r)
	})
}

// apiSecurityPolicy is the Content-Security-Policy of every answer that is
// not the page (which sets its own): nothing may load or frame it.
const apiSecurityPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// securityHeaderValues are on every answer of the daemon.
var securityHeaderValues = [][2]string{
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Referrer-Policy", "no-referrer"},
	{"Content-Security-Policy", apiSecurityPolicy},
	{"Cross-Origin-Resource-Policy", "same-origin"},
}

// securityHeaders sets the security headers on every answer, the mux's own
// 404s and redirects included; the page replaces the policy with its own.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for _, kv := range securityHeaderValues {
			h.Set(kv[0], kv[1])
		}
		next.ServeHTTP(w, r)
	})
}

// checkHost refuses a Host header that names neither loopback nor an
// allowed host: a page on a foreign name that resolves to this machine (DNS
// rebinding) must not read the cockpit or the API.
func (g *guard) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, g.allowedHosts) {
			g.refuse(w, r, protocol.Errorf(protocol.Denied,
				"this daemon does not answer to the host %q; start it with --allowed-hosts naming it", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a Host header is loopback (localhost, any
// *.localhost, 127.0.0.0/8, ::1), an IP address — a rebinding attack needs a
// name — or in allowed: exact names, "*.example.com" for its subdomains, or
// "*" for any.
func hostAllowed(hostport string, allowed []string) bool {
	host := normalizeHost(hostport)
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	for _, a := range allowed {
		a = normalizeHost(a)
		switch {
		case a == "*", a == host:
			return true
		case strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:]):
			return true
		}
	}
	return false
}

// normalizeHost is a host without its port, brackets and trailing dot, in
// lower case.
func normalizeHost(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// limitHeaders answers requests whose headers exceed HeaderLimit with the
// typed error.
func (g *guard) limitHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := headerBytes(r); n > HeaderLimit {
			g.refuse(w, r, protocol.Errorf(protocol.Validation,
				"the request line and headers are %d bytes; at most %d are accepted", n, HeaderLimit))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerBytes is about what the request line and headers took on the wire.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + len(r.Host) + 16
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// isAPI reports whether a path is the API's: /api and below.
func isAPI(path string) bool { return path == "/api" || strings.HasPrefix(path, "/api/") }

// checkAPIRequest validates an /api request's path segments and query
// before the mux sees it: invalid UTF-8, control characters (NUL), dot or
// empty segments, slashes inside a segment and overlong ids are a typed 400,
// never a redirect, a store lookup or an answer that cannot be encoded.
func (s *Server) checkAPIRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isAPI(r.URL.Path) {
			if err := checkAPIPath(r.URL.EscapedPath()); err != nil {
				s.writeError(w, r, err)
				return
			}
			if err := checkQuery(r.URL.RawQuery); err != nil {
				s.writeError(w, r, err)
				return
			}
			if r.URL.Path == "/api" { // the mux would redirect it to /api/
				s.authed(s.notFound)(w, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkAPIPath validates every segment of an escaped path.
func checkAPIPath(escaped string) error {
	if len(escaped) > maxAPIPath {
		return protocol.Errorf(protocol.Validation, "the path is longer than %d bytes", maxAPIPath)
	}
	for i, seg := range strings.Split(strings.TrimPrefix(escaped, "/"), "/") {
		v, err := url.PathUnescape(seg)
		if err != nil {
			return protocol.Errorf(protocol.Validation, "path segment %d is not valid percent-encoding", i+1)
		}
		if err := checkPathSegment(v); err != nil {
			return err.With("segment", i+1)
		}
	}
	return nil
}

// checkPathSegment validates one unescaped path segment. Its messages never
// quote the segment: it may not be encodable.
func checkPathSegment(v string) *protocol.Error {
	switch {
	case v == "":
		return protocol.Errorf(protocol.Validation, "the path has an empty segment")
	case v == "." || v == "..":
		return protocol.Errorf(protocol.Validation, "the path has a dot segment")
	case len(v) > maxPathSegment:
		return protocol.Errorf(protocol.Validation, "a path segment is %d bytes; ids and names have at most %d", len(v), maxPathSegment)
	case !utf8.ValidString(v):
		return protocol.Errorf(protocol.Validation, "a path segment is not valid UTF-8")
	case strings.ContainsFunc(v, unicode.IsControl):
		return protocol.Errorf(protocol.Validation, "a path segment contains a control character")
	case strings.ContainsAny(v, `/\`):
		return protocol.Errorf(protocol.Validation, "a path segment contains a slash")
	}
	return nil
}

// checkQuery validates a raw query string: valid escapes, UTF-8 and no
// control characters in names and values.
func checkQuery(raw string) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return protocol.Errorf(protocol.Validation, "the query string is not valid percent-encoding")
	}
	for k, vs := range q {
		for _, s := range append([]string{k}, vs...) {
			if !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
				return protocol.Errorf(protocol.Validation, "a query parameter is not valid UTF-8 text")
			}
		}
	}
	return nil
}

// canonicalPath refuses "OPTIONS *" and a path that is not in its clean
// form (empty or dot segments: //api/app/runs, /x/../api, /./api) with a
// typed validation error, where the mux would answer a redirect: the daemon
// never redirects, and a check must never see one path and the mux route
// another.
func (g *guard) canonicalPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.RequestURI == "*" || r.URL.Path == "*" {
			g.refuse(w, r, protocol.Errorf(protocol.Validation, "the request target * is not served: name a path"))
			return
		}
		if p := r.URL.EscapedPath(); p != cleanPath(p) {
			g.refuse(w, r, protocol.Errorf(protocol.Validation,
				"the path has an empty or dot segment: send it in its clean form, without // or /./ or /../"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is the form net/http's mux routes: rooted, without empty or dot
// segments, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// bodyDeadline gives a request that has a body BodyTimeout to send it: the
// deadline is on the connection's reads, so a slow (or never finished) body
// ends with the connection, authenticated or not. It is the edge's
// outermost check, so a refusal by any other cannot wait for a body without
// a deadline (and refusals close the connection instead of reading what is
// left: writeErrorBody). readBody lifts the deadline once the body is read,
// so a handler's own work, and a stream, are never cut.
func (g *guard) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.bodyTimeout))
			r.Body = &edgeBody{ReadCloser: r.Body}
		}
		next.ServeHTTP(w, r)
	})
}

// edgeBody remembers whether a request body was read to its end.
type edgeBody struct {
	io.ReadCloser
	done atomic.Bool
}

func (b *edgeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done.Store(true)
	}
	return n, err
}

// bodyUnread reports whether r declared a body that was not read to its
// end: an answer to it closes the connection rather than wait for the rest.
func bodyUnread(r *http.Request) bool {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return false
	}
	b, ok := r.Body.(*edgeBody)
	return !ok || !b.done.Load()
}

// readBody reads a size-limited body under the edge's deadline, and lifts
// the deadline once the whole body is in. A body that failed keeps it: what
// is left of it must not hold the connection while net/http drains it.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(baseWriter(w), r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	case errors.As(err, &tooBig):
		return nil, protocol.Errorf(protocol.Validation, "request body is larger than %d bytes", limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, protocol.Errorf(protocol.Validation, "the request body did not arrive in time")
	default:
		return nil, protocol.Errorf(protocol.Validation, "the request body could not be read")
	}
	if hasEscapedNUL(body) {
		return nil, protocol.Errorf(protocol.Validation, `strings must not contain NUL (\u0000)`)
	}
	return body, nil
}

// hasEscapedNUL reports whether a JSON text has a \u0000 escape (raw
// control characters are invalid JSON already). A backslash before it that
// is itself escaped (\\u0000) is text, not an escape.
func hasEscapedNUL(b []byte) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		at := i + j
		n := 0
		for k := at; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 1 {
			return true
		}
		i = at + 1
	}
}

// withLogger lets writeJSON, which has only the ResponseWriter, log with
// the server's logger.
func (s *Server) withLogger(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&loggingWriter{ResponseWriter: w, log: s.log}, r)
	})
}

// loggingWriter carries the server's logger with the ResponseWriter.
type loggingWriter struct {
	http.ResponseWriter
	log *slog.Logger
}

// Unwrap lets http.ResponseController reach the connection.
func (lw *loggingWriter) Unwrap() http.ResponseWriter { return lw.ResponseWriter }

// loggerOf finds the server's logger through any wrapping of w.
func loggerOf(w http.ResponseWriter) *slog.Logger {
	for {
		switch x := w.(type) {
		case *loggingWriter:
			return x.log
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return slog.Default()
		}
	}
}

// baseWriter is net/http's own ResponseWriter under any wrapping: what
// http.MaxBytesReader needs to close the connection after a too large body.
func baseWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// encodeFailure is the answer when a response cannot be encoded: the typed
// service_failure with its status, never a bare 500.
func encodeFailure(w http.ResponseWriter, status int, v any, err error) (int, []byte) {
	loggerOf(w).Error("encode response", "status", status, "type", fmt.Sprintf("%T", v), "err", err)
	pe := protocol.Errorf(protocol.ServiceFailure, "the response could not be encoded")
	b, _ := protocol.Marshal(protocol.ErrorBody{Error: pe})
	return pe.Code.HTTPStatus(), b
}
