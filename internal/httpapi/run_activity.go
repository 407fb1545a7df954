package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// handleRunActivity serves GET /api/app/runs/activity?edges=t0,t1,…: runs
// per bucket by status between consecutive edges (Unix seconds; the
// caller's hours or days in its own time zone) and the spread of durations.
func (s *Server) handleRunActivity(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("edges")
	parts := strings.Split(raw, ",")
	if raw == "" || len(parts) > studio.MaxActivityBuckets+1 {
		s.writeError(w, r, protocol.Errorf(protocol.Validation, "edges needs 2 to %d comma-separated Unix times", studio.MaxActivityBuckets+1).With("field", "edges"))
		return
	}
	edges := make([]time.Time, 0, len(parts))
	for _, p := range parts {
		t, err := queryTime(p, "edges")
		if err != nil || t == nil {
			s.writeError(w, r, protocol.Errorf(protocol.Validation, "edges must be comma-separated Unix times").With("field", "edges"))
			return
		}
		edges = append(edges, *t)
	}
	a, err := s.cfg.App.RunActivity(r.Context(), edges)
	answer(w, r, s, a, err)
}

// operatorWindows are the windows of GET /api/app/system/operator: how
// many intervals of what width.
var operatorWindows = map[string]struct {
	n    int
	step time.Duration
}{"1h": {12, 5 * time.Minute}, "24h": {24, time.Hour}}

// handleOperatorActivity serves GET /api/app/system/operator?window=1h|24h:
// the operator's recent turns (count, failures, median and slowest
// duration) and model errors by code, per interval, from memory.
func (s *Server) handleOperatorActivity(w http.ResponseWriter, r *http.Request) {
	window := r.URL.Query().Get("window")
	if window == "" {
		window = "1h"
	}
	win, ok := operatorWindows[window]
	if !ok {
		s.writeError(w, r, protocol.Errorf(protocol.Validation, "window must be 1h or 24h").With("field", "window"))
		return
	}
	if s.cfg.Recent == nil {
		s.writeError(w, r, protocol.Errorf(protocol.NotFound, "this daemon keeps no record of recent operator activity"))
		return
	}
	answer(w, r, s, s.cfg.Recent.Activity(win.n, win.step), nil)
}
