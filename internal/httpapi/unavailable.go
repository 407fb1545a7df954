package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/studio/operator/internal/protocol"
)

// Unavailable is the daemon's API when StateDB cannot be opened or migrated
// (ADR D1): authenticated calls answer service_failure (503) — there is no
// in-memory fallback under the same API — and /healthz says why.
func Unavailable(token, reason string) http.Handler {
	s := &Server{cfg: Config{Token: token}, metrics: newMetrics(nil), log: slog.New(slog.DiscardHandler)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": reason})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkBearer(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeError(w, r, protocol.Errorf(protocol.ServiceFailure, "StateDB is unavailable: %s", reason))
	})
	return mux
}
