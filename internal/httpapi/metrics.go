package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/studio/operator/internal/lease"
)

// metrics is a handful of counters in the Prometheus text format; the daemon
// needs no more than this, so no client library.
type metrics struct {
	turns       atomic.Int64
	streamsOpen atomic.Int64
	framesSent  atomic.Int64
	streamReads atomic.Int64 // store reads by streams: replay, and catching up with the feed
	errors      labelled
	leases      func() lease.Stats // nil: no lease kept
}

type labelled struct {
	mu sync.Mutex
	n  map[string]int64
}

func (l *labelled) inc(label string) {
	l.mu.Lock()
	if l.n == nil {
		l.n = make(map[string]int64)
	}
	l.n[label]++
	l.mu.Unlock()
}

func newMetrics() *metrics { return &metrics{} }

func (m *metrics) handle(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP studio_operator_turns_submitted_total Turns accepted since start.\n# TYPE studio_operator_turns_submitted_total counter\nstudio_operator_turns_submitted_total %d\n", m.turns.Load())
	fmt.Fprintf(w, "# HELP studio_operator_streams_open Open SSE streams.\n# TYPE studio_operator_streams_open gauge\nstudio_operator_streams_open %d\n", m.streamsOpen.Load())
	fmt.Fprintf(w, "# HELP studio_operator_frames_streamed_total Frames written to SSE streams.\n# TYPE studio_operator_frames_streamed_total counter\nstudio_operator_frames_streamed_total %d\n", m.framesSent.Load())
	fmt.Fprintf(w, "# HELP studio_operator_stream_store_reads_total Store reads by SSE streams (replay and catching up; live frames come from memory).\n# TYPE studio_operator_stream_store_reads_total counter\nstudio_operator_stream_store_reads_total %d\n", m.streamReads.Load())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(w, "# HELP studio_go_heap_stack_inuse_bytes Go heap and goroutine stacks in use.\n# TYPE studio_go_heap_stack_inuse_bytes gauge\nstudio_go_heap_stack_inuse_bytes %d\n", ms.HeapInuse+ms.StackInuse)
	fmt.Fprintf(w, "# HELP studio_go_goroutines Goroutines.\n# TYPE studio_go_goroutines gauge\nstudio_go_goroutines %d\n", runtime.NumGoroutine())
	fmt.Fprintf(w, "# HELP studio_http_errors_total Error responses by code.\n# TYPE studio_http_errors_total counter\n")
	m.errors.mu.Lock()
	codes := make([]string, 0, len(m.errors.n))
	for c := range m.errors.n {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		fmt.Fprintf(w, "studio_http_errors_total{code=%q} %d\n", c, m.errors.n[c])
	}
	m.errors.mu.Unlock()
	if m.leases != nil {
		writeLease(w, m.leases())
	}
}

// writeLease writes the lease keeper's counters (issue 13).
func writeLease(w io.Writer, st lease.Stats) {
	family := func(name, kind, help string, v int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", name, help, name, kind, name, v)
	}
	family("studio_instances", "gauge", "Live daemon instances sharing the database, as this daemon last saw them.", int64(st.Instances))
	family("studio_lease_renewals_total", "counter", "Lease renewals of this daemon.", st.Renewals)
	family("studio_lease_renewal_failures_total", "counter", "Lease renewals the database refused or did not answer.", st.RenewFailures)
	family("studio_lease_reaped_instances_total", "counter", "Instances whose lease expired that this daemon's reaper took over.", st.Reaped)
}
