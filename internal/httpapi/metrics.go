package httpapi

import (
	"net/http"
	"time"

	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/protocol"
)

// serverMetrics is what the handlers record, over the daemon's metrics
// registry (package metrics owns the families and their names).
type serverMetrics struct {
	reg         *metrics.Registry
	turns       turnCounter
	streamsOpen streamGauge
	framesSent  frameCounter
	errors      errorCounter
}

// newMetrics records into reg; nil gets a registry of its own, so a server
// built without one (tests) still serves /metrics.
func newMetrics(reg *metrics.Registry) *serverMetrics {
	if reg == nil {
		reg = metrics.New(metrics.Build{Version: "dev"})
	}
	return &serverMetrics{reg: reg, turns: turnCounter{reg}, streamsOpen: streamGauge{reg}, framesSent: frameCounter{reg}, errors: errorCounter{reg}}
}

// handle serves the Prometheus exposition.
func (m *serverMetrics) handle(w http.ResponseWriter, r *http.Request) {
	m.reg.Handler().ServeHTTP(w, r)
}

// flushed records the frames of one flushed SSE write: how many, and for
// those committed while the stream was open, the commit-to-flush latency.
func (m *serverMetrics) flushed(frames []protocol.RawFrame, opened time.Time) {
	now := time.Now()
	for _, f := range frames {
		if at := protocol.Time(f.CreatedAt); !at.Before(opened) {
			m.reg.CommitToFlush(now.Sub(at))
		}
	}
}

type turnCounter struct{ reg *metrics.Registry }

func (c turnCounter) Add(int64) { c.reg.TurnSubmitted() }

type streamGauge struct{ reg *metrics.Registry }

func (g streamGauge) Add(delta int64) { g.reg.StreamsOpen(int(delta)) }

type frameCounter struct{ reg *metrics.Registry }

func (c frameCounter) Add(n int64) { c.reg.FramesStreamed(int(n)) }

type errorCounter struct{ reg *metrics.Registry }

func (c errorCounter) inc(code string) { c.reg.HTTPError(code) }
