package httpapi

import (
	"net/http"
	"time"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/metrics"
)

// serverMetrics is what the handlers record, over the daemon's metrics
// registry (package metrics owns the families and their names).
type serverMetrics struct {
	reg         *metrics.Registry
	turns       turnCounter
	streamsOpen streamGauge
	framesSent  frameCounter
	streamReads readCounter // store reads by streams: replay, and catching up with the feed
	errors      errorCounter
}

// newMetrics records into reg; nil gets a registry of its own, so a server
// built without one (tests) still serves /metrics.
func newMetrics(reg *metrics.Registry) *serverMetrics {
	if reg == nil {
		reg = metrics.New(metrics.Build{Version: "dev"})
	}
	return &serverMetrics{reg: reg, turns: turnCounter{reg}, streamsOpen: streamGauge{reg}, framesSent: frameCounter{reg},
		streamReads: readCounter{reg}, errors: errorCounter{reg}}
}

// handle serves the Prometheus exposition.
func (m *serverMetrics) handle(w http.ResponseWriter, r *http.Request) {
	m.reg.Handler().ServeHTTP(w, r)
}

// liveFlushed records, for the live frames of one flushed write, the time
// from each frame's commit (its createdAt, which the feed keeps beside the
// encoded frame) to the flush.
func (m *serverMetrics) liveFlushed(events []feed.Event) {
	now := time.Now()
	for _, e := range events {
		if !e.CreatedAt.IsZero() {
			m.reg.CommitToFlush(now.Sub(e.CreatedAt))
		}
	}
}

type turnCounter struct{ reg *metrics.Registry }

func (c turnCounter) Add(int64) { c.reg.TurnSubmitted() }

type streamGauge struct{ reg *metrics.Registry }

func (g streamGauge) Add(delta int64) { g.reg.StreamsOpen(int(delta)) }

type frameCounter struct{ reg *metrics.Registry }

func (c frameCounter) Add(n int64) { c.reg.FramesStreamed(int(n)) }

type readCounter struct{ reg *metrics.Registry }

func (c readCounter) Add(n int64) { c.reg.StreamStoreReads(int(n)) }

type errorCounter struct{ reg *metrics.Registry }

func (c errorCounter) inc(code string) { c.reg.HTTPError(code) }
