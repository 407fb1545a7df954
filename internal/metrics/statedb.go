package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreOperation records one store operation's duration.
func (r *Registry) StoreOperation(op string, d time.Duration) {
	if r == nil {
		return
	}
	r.storeOps.WithLabelValues(op).Observe(max(d, 0).Seconds())
}

// WriterBatch records the size of one group-commit batch.
func (r *Registry) WriterBatch(size int) {
	if r == nil {
		return
	}
	r.writerBatch.Observe(float64(size))
}

// WriterQueueWait records how long one write transaction waited for the
// group-commit writer.
func (r *Registry) WriterQueueWait(d time.Duration) {
	if r == nil {
		return
	}
	r.writerQueueWait.Observe(max(d, 0).Seconds())
}

// ObserveWriter exposes the age of the oldest write transaction the
// group-commit writer has not answered yet, read from oldest at each
// scrape. Call it once.
func (r *Registry) ObserveWriter(oldest func() time.Duration) {
	if r == nil {
		return
	}
	r.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "studio_store_writer_oldest_wait_seconds",
		Help: "Age of the oldest write transaction handed to the group-commit writer (SQLite) and not yet committed; 0 when none waits."},
		func() float64 { return oldest().Seconds() }))
}

// ObservePendingProposals exposes the proposals waiting for a person's
// decision, counted by pending at each scrape (from StateDB: every
// daemon's, across restarts). A count that fails keeps the last value.
func (r *Registry) ObservePendingProposals(pending func() (int, error)) {
	if r == nil {
		return
	}
	r.register(lastGoodGauge(prometheus.GaugeOpts{Name: "studio_operator_proposals_pending",
		Help: "Proposals waiting for a person to confirm or deny them (all daemons on the database)."},
		func() (float64, error) {
			n, err := pending()
			return float64(n), err
		}))
}

// lastGoodGauge is a gauge read by read at each scrape that keeps its last
// good value when a read fails (a database away for a moment), rather
// than dropping to 0 and firing alerts on a reading nobody made.
func lastGoodGauge(opts prometheus.GaugeOpts, read func() (float64, error)) prometheus.GaugeFunc {
	var mu sync.Mutex
	var last float64
	return prometheus.NewGaugeFunc(opts, func() float64 {
		mu.Lock()
		defer mu.Unlock()
		if v, err := read(); err == nil {
			last = v
		}
		return last
	})
}

// ObserveReadiness exposes studio_ready, read from ready at each scrape:
// 1 while the daemon takes work (GET /readyz answers 200), else 0. Call
// it once.
func (r *Registry) ObserveReadiness(ready func() bool) {
	if r == nil {
		return
	}
	r.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "studio_ready",
		Help: "1 while the daemon takes work (GET /readyz answers 200); 0 while it does not: shutting down, database unreachable, migrations pending, lease not held, StateDB writer stalled."},
		func() float64 {
			if ready() {
				return 1
			}
			return 0
		}))
}
