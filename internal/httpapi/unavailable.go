package httpapi

import (
	"net/http"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
)

// Unavailable is the daemon's API when StateDB cannot be opened or migrated
// (docs/design.md §3): authenticated calls answer service_failure (503) —
// there is no in-memory fallback under the same API. The open /readyz says
// not ready; the open /healthz says degraded and nothing else; with the token
// it also says why. Neither names a host path: the full reason is in the
// daemon's log. The edge (Host check, security headers, header and body
// limits) is the Server's.
func Unavailable(cfg Config, reason string) http.Handler {
	s := newServer(Config{Token: cfg.Token, Logger: cfg.Logger, AllowedHosts: cfg.AllowedHosts, BodyTimeout: cfg.BodyTimeout})
	reason = redact.Text(reason)
	mux := s.mux
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		h := health{Status: "degraded"}
		if s.checkBearer(r) == nil {
			h.Reason = "StateDB is unavailable: " + reason
		}
		writeJSON(w, http.StatusServiceUnavailable, h)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := readiness{Status: "not_ready", Reason: "database unavailable"}
		if s.checkBearer(r) == nil {
			rd.Detail = "StateDB is unavailable: " + reason
		}
		writeJSON(w, http.StatusServiceUnavailable, rd)
	})
	mux.HandleFunc("/", s.authed(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, protocol.Errorf(protocol.ServiceFailure, "StateDB is unavailable: %s", reason))
	}))
	s.handler = s.edge(mux)
	return s
}
