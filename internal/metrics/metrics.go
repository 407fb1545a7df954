// Package metrics owns the daemon's Prometheus metrics: every family the
// daemon exposes, defined once with its name, unit and labels, and small
// typed recording methods the other packages call (HTTP middleware, the SSE
// stream, the model provider decorator, the application's executor and
// scheduler, and the coordinator's observer). It is the only package that
// imports the Prometheus client; callers never see a Prometheus type except
// the scrape handler.
//
// Names follow the Prometheus conventions: a studio_ prefix, base units
// (seconds, not milliseconds), _total on counters, and labels of small,
// fixed cardinality (a route pattern, never a raw path or an id).
package metrics

import (
	"net/http"
	"regexp"
	"runtime"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Latency buckets in seconds. Short covers HTTP handlers and the
// commit-to-flush path (sub-millisecond to a few seconds); long covers model
// calls and turns (up to ten minutes); lag covers the scheduler, which
// ticks every 15 s by default.
var (
	shortBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	longBuckets  = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
	lagBuckets   = []float64{.1, .5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300}
	// streamBuckets cover an SSE stream's life: a reconnect within a
	// second, up to a cockpit left open for a day.
	streamBuckets = []float64{1, 10, 60, 300, 900, 1800, 3600, 3 * 3600, 8 * 3600, 24 * 3600}
	// batchBuckets cover the group-commit writer's batch sizes (at most
	// 1 024 logical transactions).
	batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
)

// Registry holds every family. Its methods are safe for concurrent use; a
// nil *Registry records nothing, so callers need not check.
type Registry struct {
	reg *prometheus.Registry

	mu       sync.Mutex
	families map[string]bool // every family registered, observed yet or not

	buildInfo *prometheus.GaugeVec

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	httpErrors   *prometheus.CounterVec
	authFailures prometheus.Counter

	streamsOpen    prometheus.Gauge
	streamLifetime *prometheus.HistogramVec
	framesStreamed prometheus.Counter
	streamReads    prometheus.Counter
	commitToFlush  prometheus.Histogram

	turnsSubmitted prometheus.Counter
	turnsEnded     *prometheus.CounterVec
	turnQueueDepth prometheus.Gauge
	turnQueueWait  prometheus.Histogram
	turnDuration   *prometheus.HistogramVec
	framesAppended *prometheus.CounterVec
	proposals      *prometheus.CounterVec
	effectAcks     *prometheus.CounterVec

	mcpCalls    *prometheus.CounterVec
	mcpDuration *prometheus.HistogramVec

	modelFirstToken *prometheus.HistogramVec
	modelDuration   *prometheus.HistogramVec
	modelCalls      *prometheus.CounterVec
	modelFailures   *prometheus.CounterVec
	modelRetries    *prometheus.CounterVec
	modelTokens     *prometheus.CounterVec

	storeOps        *prometheus.HistogramVec
	writerBatch     prometheus.Histogram
	writerQueueWait prometheus.Histogram

	runsFinished  *prometheus.CounterVec
	runsRunning   prometheus.Gauge
	runDuration   *prometheus.HistogramVec
	schedulerLag  prometheus.Histogram
	schedulesSkip prometheus.Counter

	webhookDeliveries *prometheus.CounterVec
}

// Build describes the binary for studio_build_info.
type Build struct {
	Version  string // module version or VCS revision
	Revision string // VCS revision, if known
}

// New registers every family, the Go runtime and process collectors, and
// the build info.
func New(b Build) *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), families: make(map[string]bool)}
	f := factory{r}

	r.buildInfo = f.gaugeVec("studio_build_info", "Always 1; the labels describe the running binary.", "version", "revision", "goversion")
	r.buildInfo.WithLabelValues(b.Version, b.Revision, runtime.Version()).Set(1)

	r.httpRequests = f.counterVec("studio_http_requests_total", "HTTP requests answered, by method, route pattern and status class (2xx, 4xx, ...).", "method", "route", "status")
	r.httpDuration = f.histogramVec("studio_http_request_duration_seconds", "Time to answer an HTTP request, by method and route pattern. SSE streams are not observed: they last as long as the client stays.", shortBuckets, "method", "route")
	r.httpErrors = f.counterVec("studio_http_errors_total", "Error responses by protocol error code.", "code")
	r.authFailures = f.counter("studio_auth_failures_total", "Requests refused for a missing, wrong or misplaced credential.")

	r.streamsOpen = f.gauge("studio_operator_streams_open", "Open SSE streams.")
	r.streamLifetime = f.histogramVec("studio_operator_stream_duration_seconds", "How long an SSE stream stayed open, by why it ended (client_gone, server_closing, store_error).", streamBuckets, "reason")
	r.framesStreamed = f.counter("studio_operator_frames_streamed_total", "Frames written to SSE streams (replayed and live).")
	r.streamReads = f.counter("studio_operator_stream_store_reads_total", "Store reads by SSE streams (replay and catching up; live frames come from memory).")
	r.commitToFlush = f.histogram("studio_operator_commit_to_flush_seconds", "Time from a frame's commit (its createdAt) to the flush of the SSE write that carried it, for frames committed while the stream was open.", shortBuckets)

	r.turnsSubmitted = f.counter("studio_operator_turns_submitted_total", "Turns accepted (202).")
	r.turnsEnded = f.counterVec("studio_operator_turns_total", "Turns ended, by done outcome (completed, failed, cancelled) and error code (empty when none).", "outcome", "code")
	r.turnQueueDepth = f.gauge("studio_operator_turn_queue_depth", "Turns accepted and waiting for a worker.")
	r.turnQueueWait = f.histogram("studio_operator_turn_queue_wait_seconds", "Time a turn waited queued before a worker started it.", longBuckets)
	r.turnDuration = f.histogramVec("studio_operator_turn_duration_seconds", "Time from a turn's start to its done frame, by model provider and outcome; time awaiting confirmation included.", longBuckets, "provider", "outcome")
	r.framesAppended = f.counterVec("studio_operator_frames_appended_total", "Frames committed to StateDB for ended turns, by the turn's outcome.", "outcome")
	r.proposals = f.counterVec("studio_operator_proposals_total", "Proposal transitions, by audit decision (confirmed, denied, expired, executed, failed, indeterminate).", "decision")
	r.effectAcks = f.counterVec("studio_operator_effects_total", "UI effects acknowledged, by status (applied, rejected, expired) and effect kind.", "status", "kind")

	r.mcpCalls = f.counterVec("studio_mcp_tool_calls_total", "MCP tool calls, by tool and outcome (ok, input_required, a protocol error code such as validation, conflict or rate_limited, denied by role).", "tool", "outcome")
	r.mcpDuration = f.histogramVec("studio_mcp_tool_call_duration_seconds", "Time to answer an MCP tool call, by tool.", shortBuckets, "tool")

	r.modelFirstToken = f.histogramVec("studio_model_time_to_first_token_seconds", "Time from a model call's start to its first text or tool call, by provider.", longBuckets, "provider")
	r.modelDuration = f.histogramVec("studio_model_call_duration_seconds", "Duration of a model call (one provider stream), by provider and outcome (ok, error, cancelled).", longBuckets, "provider", "outcome")
	r.modelCalls = f.counterVec("studio_model_calls_total", "Model calls, by provider and outcome (ok, error, cancelled).", "provider", "outcome")
	r.modelFailures = f.counterVec("studio_model_failures_total", "Failed model calls, by provider and protocol error code (model_failure, rate_limited, ...).", "provider", "code")
	r.modelRetries = f.counterVec("studio_model_retries_total", "Model calls retried by the coordinator after a retryable failure, by provider and the failure's code.", "provider", "code")
	r.modelTokens = f.counterVec("studio_model_tokens_total", "Tokens the provider reported, by provider and direction (input, output). Providers that report none add nothing.", "provider", "direction")

	r.storeOps = f.histogramVec("studio_store_operation_duration_seconds", "Duration of a StateDB operation (one store call: its queries, retries and wait for the writer), by operation (append_frames, submit_turn, list_frames, ...).", shortBuckets, "operation")
	r.writerBatch = f.histogram("studio_store_writer_batch_size", "Write transactions committed together by the group-commit writer (SQLite), one sample per batch.", batchBuckets)
	r.writerQueueWait = f.histogram("studio_store_writer_queue_wait_seconds", "Time a write transaction waited for the group-commit writer (SQLite) to take it into a batch.", shortBuckets)

	r.runsFinished = f.counterVec("studio_app_runs_total", "Playbook runs ended, by final status (succeeded, failed, cancelled).", "status")
	r.runsRunning = f.gauge("studio_app_runs_running", "Playbook runs executing in this process.")
	r.runDuration = f.histogramVec("studio_app_run_duration_seconds", "Duration of a playbook run from start to end, by final status.", longBuckets, "status")
	r.schedulerLag = f.histogram("studio_app_scheduler_lag_seconds", "Delay between a schedule slot's due time and the launch of its run.", lagBuckets)
	r.webhookDeliveries = f.counterVec("studio_webhook_deliveries_total", "Webhook delivery attempts, by event and outcome (delivered; retry: refused or unanswered, tried again later; failed: the last attempt).", "event", "outcome")
	r.schedulesSkip = f.counter("studio_app_schedule_slots_skipped_total", "Schedule slots skipped because they were missed.")

	r.register(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		// The one summary studio bench reads, kept under its name (the Go
		// collector splits it; go_goroutines is the goroutine count).
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "studio_go_heap_stack_inuse_bytes", Help: "Go heap and goroutine stacks in use."},
			func() float64 {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				return float64(ms.HeapInuse + ms.StackInuse)
			}),
	)
	return r
}

// Handler serves the Prometheus text exposition of every family.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// register registers the collectors and notes the families they describe.
func (r *Registry) register(cs ...prometheus.Collector) {
	r.reg.MustRegister(cs...)
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.families[m[1]] = true
		}
	}
}

// fqName reads a family's name from a Desc's description (Desc has no
// accessor for it).
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Families returns the name of every family registered, whether or not it
// has a sample yet (a labelled family has none until its first
// observation, and is then absent from the exposition): what a dashboard
// or an alert rule may refer to.
func (r *Registry) Families() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool, len(r.families))
	for n := range r.families {
		out[n] = true
	}
	return out
}

// Gather returns the current families' names (for tests and doctor).
func (r *Registry) Gather() (map[string]bool, error) {
	mfs, err := r.reg.Gather()
	names := make(map[string]bool, len(mfs))
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names, err
}

// factory registers families on one registry.
type factory struct{ r *Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.r.register(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.r.register(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.r.register(g)
	return g
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.r.register(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.r.register(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.r.register(h)
	return h
}
