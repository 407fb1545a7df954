// Package httpapi is the HTTP adapter of the operator protocol and of the
// cockpit's application API (docs/design.md §5): routing, bearer
// authentication, stream tickets, strict request decoding, the one
// error-to-status mapping, and Server-Sent Events. The Go client of this API
// is internal/apiclient.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/sse"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/turnstats"
)

// Body size limits. A turn holds up to 32 768 characters of instruction,
// each up to 12 bytes of JSON (a \uXXXX surrogate pair), plus its context;
// everything else is small.
const (
	maxSmallBody          = 64 << 10
	worstJSONBytesPerChar = 12
	maxTurnBody           = protocol.MaxInstructionChars*worstJSONBytesPerChar + maxSmallBody
)

// Config wires a Server.
type Config struct {
	// The services the handlers call (services.go); cmd/studio wires the
	// coordinator and the conversation service in.
	Conversations Conversations
	Streams       Streams
	Turns         Turns
	Proposals     Proposals
	Effects       Effects
	Catalog       Catalog
	// Token is the bearer token of the bootstrap admin (owner) when
	// Principals is nil; with Principals, tokens are looked up there.
	Token string
	// Principals authenticates personal tokens and keeps principals (the
	// admin routes); nil accepts Token alone, as the admin owner.
	Principals store.PrincipalStore
	// Policy is the gate every request's decisions ask (internal/policy):
	// the policies, and where denials are recorded. Nil: the built-in
	// policies, recording nothing.
	Policy *policy.Gate
	// Webhooks keeps webhooks and their deliveries (the admin routes);
	// nil refuses those routes.
	Webhooks store.WebhookStore
	// AuthProxy, when set (with Principals), signs requests in by a
	// trusted proxy's header besides bearer tokens.
	AuthProxy *AuthProxy
	// Now is the clock of token expiry (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// Heartbeat is the interval of SSE comment heartbeats (default
	// sse.DefaultHeartbeat).
	Heartbeat time.Duration
	// WriteTimeout bounds one SSE write to a slow client (default
	// sse.DefaultWriteTimeout).
	WriteTimeout time.Duration
	// App serves the cockpit's application API (/api/app/...) when set.
	App *studio.Service
	// Recent, when set, is the operator's recent activity that GET
	// /api/app/system/operator charts (an Observer of the coordinator).
	Recent *turnstats.Ring
	// AllowedHosts are the Host header names answered besides loopback names
	// and IP addresses (DNS rebinding): exact names, "*.example.com" for
	// subdomains, "*" for any.
	AllowedHosts []string
	// BodyTimeout is how long a request body may take to arrive (default
	// DefaultBodyTimeout).
	BodyTimeout time.Duration
	// Extra registers more routes (the application API, the web page) on the
	// same mux; /api routes are authenticated by the server.
	Extra []func(mux *http.ServeMux)
	// NotFoundPage, when set, answers a browser's GET of a path outside
	// /api that no route serves (the cockpit's not-found page); anything
	// else unknown gets the typed not_found.
	NotFoundPage http.HandlerFunc
	// Metrics records the HTTP, stream and error families; nil gets a
	// registry of the server's own.
	Metrics *metrics.Registry
	// Ready is the readiness check of /readyz beyond the server's own
	// (not draining): "" when the daemon can take work, else a short
	// reason anyone may read, with err the detail for a caller with the
	// token. Nil: ready whenever not draining.
	Ready func(ctx context.Context) (reason string, err error)
	// Lease, when set (several daemons on one PostgreSQL), is this
	// daemon's lease: streams say when it cannot be proven (a
	// LeaseWatcher tells them at once; stream_lease.go).
	Lease LeaseHolder
	// CallTimeout bounds the database read that authenticates a request
	// (default 30 s): a daemon whose connections hang answers, not waits.
	CallTimeout time.Duration
	// MCP, when set, builds the handler of /mcp (internal/mcpserver) given
	// the server's typed error writer; the server authenticates its
	// requests and checks their Origin (mcp_routes.go).
	MCP func(refuse func(http.ResponseWriter, *http.Request, error)) http.Handler
	// AGUI, when set, builds the handler of POST /api/agui (internal/agui)
	// given what the server shares with it (DoorSupport); the server
	// authenticates its requests, the handler asks the policy for each step.
	AGUI func(DoorSupport) http.Handler
}

// DoorSupport is what the server shares with a door it mounts whose
// answers stream (AG-UI): its typed error writer, and the decision a
// stream of its own is made again with when a right may have been taken
// away.
type DoorSupport struct {
	Refuse func(http.ResponseWriter, *http.Request, error)
	// AccessSignal closes when a token was revoked, a principal disabled
	// or given another role, or a conversation another visibility.
	AccessSignal func() <-chan struct{}
	// StillAllowed decides the request again for its credential as it is
	// now and the conversation as it is now: access_revoked when action on
	// convID is no longer allowed.
	StillAllowed func(ctx context.Context, convID string, action policy.Action) error
}

// Server serves the HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	gate    *policy.Gate
	mux     *routeMux
	handler http.Handler // the mux behind the edge
	metrics *serverMetrics

	beatsOnce  sync.Once
	beats      *heartbeats // started by the first stream
	closesOnce sync.Once
	closes     *closeWatch // started by the first stream; nil: none

	// Streams served on connections taken over: Close ends them (base)
	// and waits for them.
	base     context.Context
	stop     context.CancelFunc
	streamMu sync.Mutex
	closed   bool
	conns    map[net.Conn]struct{} // the connections taken over
	streams  sync.WaitGroup

	closeOnce sync.Once
	closing   chan struct{}
	draining  atomic.Bool // /readyz answers not ready: the daemon is stopping
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	s := newServer(cfg)
	s.routes()
	for _, register := range cfg.Extra {
		register(s.mux.ServeMux)
	}
	s.handler = s.edge(s.mux)
	return s
}

// newServer applies the defaults of cfg; the caller registers routes.
func newServer(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = sse.DefaultHeartbeat
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = sse.DefaultWriteTimeout
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.NewGate(policy.GateConfig{Logger: cfg.Logger})
	}
	s := &Server{cfg: cfg, log: cfg.Logger, gate: cfg.Policy, mux: newRouteMux(),
		metrics: newMetrics(cfg.Metrics), closing: make(chan struct{})}
	s.base, s.stop = context.WithCancel(context.Background())
	return s
}

// Drain makes /readyz answer not ready from now on: the daemon is shutting
// down, so a load balancer sends new work elsewhere while running turns
// finish. Close drains too.
func (s *Server) Drain() { s.draining.Store(true) }

// Close ends open streams cleanly and waits for those on connections it
// took over; call it before http.Server.Shutdown.
func (s *Server) Close() {
	s.Drain()
	s.closeOnce.Do(func() {
		s.streamMu.Lock()
		s.closed = true
		close(s.closing) // a stream writes nothing more (push)
		for c := range s.conns {
			// A stream blocked writing to a client that does not read
			// returns now, not at its write timeout.
			_ = c.SetWriteDeadline(time.Now())
		}
		s.streamMu.Unlock()
		s.stop()
		s.streams.Wait()
		s.beatsOnce.Do(func() {}) // no wheel starts after this
		if s.beats != nil {
			s.beats.close()
		}
		s.closesOnce.Do(func() {})
		if s.closes != nil {
			s.closes.close()
		}
	})
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /healthz", s.handleHealthz)
	m.HandleFunc("GET /readyz", s.handleReadyz)
	m.HandleFunc("GET /metrics", s.authed(s.metrics.handle))
	m.HandleFunc("GET /api/openapi.json", s.handleOpenAPI) // open, like /healthz
	m.HandleFunc("/api/", s.authed(s.notFound))
	m.HandleFunc("POST /api/operator/conversations", s.authed(s.handleCreateConversation))
	m.HandleFunc("GET /api/operator/conversations", s.authed(s.handleListConversations))
	m.HandleFunc("GET /api/operator/conversations/{id}", s.authed(s.handleGetConversation))
	m.HandleFunc("PATCH /api/operator/conversations/{id}", s.authed(s.handleUpdateConversation))
	m.HandleFunc("DELETE /api/operator/conversations/{id}", s.authed(s.handleDeleteConversation))
	m.HandleFunc("POST /api/operator/conversations/{id}/turns", s.authed(s.handleSubmitTurn))
	m.HandleFunc("POST /api/operator/conversations/{id}/requests/{rid}/cancel", s.authed(s.handleCancel))
	m.HandleFunc("GET /api/operator/conversations/{id}/stream", s.handleStream) // bearer or ticket
	m.HandleFunc("POST /api/operator/stream-tickets", s.authed(s.handleCreateTicket))
	if s.cfg.App != nil {
		s.appRoutes()
	}
	m.HandleFunc("GET /api/operator/conversations/{id}/effects/{eid}", s.authed(s.handleGetEffect))
	m.HandleFunc("POST /api/operator/conversations/{id}/effects/{eid}/ack", s.authed(s.handleAckEffect))
	m.HandleFunc("POST /api/operator/conversations/{id}/proposals/{pid}/confirm", s.authed(s.handleConfirm))
	m.HandleFunc("POST /api/operator/conversations/{id}/proposals/{pid}/deny", s.authed(s.handleDeny))
	m.HandleFunc("GET /api/operator/conversations/{id}/proposals", s.authed(s.handleListProposals))
	m.HandleFunc("GET /api/operator/conversations/{id}/proposals/{pid}", s.authed(s.handleGetProposal))
	m.HandleFunc("GET /api/operator/proposals", s.authed(s.handleListProposals))
	m.HandleFunc("GET /api/operator/proposals/{pid}", s.authed(s.handleGetProposal))
	m.HandleFunc("GET /api/operator/routes", s.authed(s.handleRoutes))
	m.HandleFunc("GET /api/operator/tools", s.authed(s.handleTools))
	s.featureRoutes()
	s.principalRoutes()
	s.webhookRoutes()
	s.policyRoutes()
	s.mcpRoutes()
	s.aguiRoutes()
}

// routeMux is the server's mux, remembering the patterns registered through
// it so that tests can walk every route.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

func (s *Server) now() time.Time { return s.cfg.Now() }

// callTimeout is Config.CallTimeout or its default.
func (s *Server) callTimeout() time.Duration {
	if s.cfg.CallTimeout > 0 {
		return s.cfg.CallTimeout
	}
	return 30 * time.Second
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// notFound answers an /api path no route serves.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, protocol.Errorf(protocol.NotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

// writeError writes {"error": ProtocolError} with the code's status. Errors
// without a code are logged and shown as service_failure.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	pe := protocol.ErrorOf(err)
	var typed *protocol.Error
	if !errors.As(err, &typed) {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	s.metrics.errors.inc(string(pe.Code))
	writeErrorBody(w, r, pe)
}

// writeErrorBody writes a typed error with its status and headers. A
// request whose body was not read to its end is answered with Connection:
// close, so net/http neither waits for the rest of it before answering nor
// reads it after.
func writeErrorBody(w http.ResponseWriter, r *http.Request, pe *protocol.Error) {
	if pe.Code == protocol.AuthRequired && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="studio"`)
	}
	if status := pe.Code.HTTPStatus(); (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && pe.RetryAfterMs > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt((pe.RetryAfterMs+999)/1000, 10))
	}
	if bodyUnread(r) {
		// net/http reads what is left of a body before it closes the
		// connection (to keep the reader reusable): a read deadline of now
		// ends that read at once, after the answer went out.
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	writeJSON(w, pe.Code.HTTPStatus(), protocol.ErrorBody{Error: pe})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := protocol.Marshal(v)
	if err != nil {
		status, b = encodeFailure(w, status, v, err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// decodeBody strictly decodes a size-limited JSON body, read within the
// edge's body deadline.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !jsonMediaType(ct) {
		return protocol.Errorf(protocol.Validation, "Content-Type must be application/json")
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	return protocol.DecodeRequest(body, v)
}

// jsonMediaType reports whether a Content-Type names application/json:
// the media type exactly, in any case, with any parameters
// (application/json; charset=utf-8); never application/jsonx.
func jsonMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json" // ParseMediaType lowers it
}

// handleHealthz is the open health check: ok or degraded, nothing more
// without the token (docs/design.md §16).
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, health{Status: "ok"})
}

// handleReadyz is the open readiness check: 200 ready, or 503 not_ready
// with a short reason (shutting down, database unreachable, migrations
// pending, lease not held). Like /healthz it needs no token; the detail
// behind a reason is only for a caller with it. Liveness stays /healthz: a
// daemon that is not ready must not be restarted for it.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	reason, err := s.Readiness(r.Context())
	if reason == "" {
		writeJSON(w, http.StatusOK, readiness{Status: "ready"})
		return
	}
	rd := readiness{Status: "not_ready", Reason: reason}
	if err != nil && s.checkBearer(r) == nil {
		rd.Detail = redact.Text(err.Error())
	}
	writeJSON(w, http.StatusServiceUnavailable, rd)
}

// Readiness is what /readyz answers: "" when the daemon takes work, else
// why not, with the error behind it (for the metrics as for /readyz).
func (s *Server) Readiness(ctx context.Context) (reason string, err error) {
	if s.draining.Load() {
		return "shutting down", nil
	}
	if s.cfg.Ready == nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return s.cfg.Ready(ctx)
}

// readyTimeout bounds the readiness check: a database that does not answer
// within it is not ready.
const readyTimeout = 2 * time.Second

// readiness is the answer of /readyz.
type readiness struct {
	Status string `json:"status"`           // ready | not_ready
	Reason string `json:"reason,omitempty"` // why not ready, for anyone
	Detail string `json:"detail,omitempty"` // the error behind it, for a caller with the token
}

// health is the answer of /healthz. Reason is only for a caller with the
// token, and names no host path.
type health struct {
	Status string `json:"status"` // ok | degraded
	Reason string `json:"reason,omitempty"`
}
