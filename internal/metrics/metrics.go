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
	"strconv"
	"sync"
	"time"

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
	// 512 logical transactions).
	batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
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

// --- HTTP --------------------------------------------------------------------

// HTTPRequest records one answered request. route is the matched pattern
// ("GET /api/app/runs/{id}"), or "unmatched"; stream says the response was an
// SSE stream, whose duration is not a latency.
func (r *Registry) HTTPRequest(method, route string, status int, d time.Duration, stream bool) {
	if r == nil {
		return
	}
	r.httpRequests.WithLabelValues(method, route, StatusClass(status)).Inc()
	if !stream {
		r.httpDuration.WithLabelValues(method, route).Observe(d.Seconds())
	}
}

// StatusClass is "2xx" for 200..299 and so on.
func StatusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

// HTTPError records an error response's protocol error code.
func (r *Registry) HTTPError(code string) {
	if r == nil {
		return
	}
	r.httpErrors.WithLabelValues(code).Inc()
}

// MCPToolCall records one MCP tool call's outcome and latency (d zero:
// refused before it ran, not observed).
func (r *Registry) MCPToolCall(tool, outcome string, d time.Duration) {
	if r == nil {
		return
	}
	r.mcpCalls.WithLabelValues(tool, outcome).Inc()
	if d > 0 {
		r.mcpDuration.WithLabelValues(tool).Observe(d.Seconds())
	}
}

// AuthFailure records a refused credential.
func (r *Registry) AuthFailure() {
	if r == nil {
		return
	}
	r.authFailures.Inc()
}

// --- streams -----------------------------------------------------------------

// StreamsOpen adds delta (1 when a stream starts, -1 when it ends) to the
// open SSE streams.
func (r *Registry) StreamsOpen(delta int) {
	if r == nil {
		return
	}
	r.streamsOpen.Add(float64(delta))
}

// StreamClosed records an SSE stream's lifetime and why it ended.
func (r *Registry) StreamClosed(reason string, d time.Duration) {
	if r == nil {
		return
	}
	r.streamLifetime.WithLabelValues(reason).Observe(max(d, 0).Seconds())
}

// FramesStreamed records frames written to a stream.
func (r *Registry) FramesStreamed(n int) {
	if r == nil || n <= 0 {
		return
	}
	r.framesStreamed.Add(float64(n))
}

// StreamStoreReads records store reads by streams.
func (r *Registry) StreamStoreReads(n int) {
	if r == nil || n <= 0 {
		return
	}
	r.streamReads.Add(float64(n))
}

// CommitToFlush records the time from a frame's commit to its flush.
func (r *Registry) CommitToFlush(d time.Duration) {
	if r == nil {
		return
	}
	r.commitToFlush.Observe(max(d, 0).Seconds())
}

// --- turns, proposals, effects (the coordinator's observer) ------------------

// TurnSubmitted records an accepted turn.
func (r *Registry) TurnSubmitted() {
	if r == nil {
		return
	}
	r.turnsSubmitted.Inc()
}

// TurnQueueDepth sets how many accepted turns wait for a worker.
func (r *Registry) TurnQueueDepth(n int) {
	if r == nil {
		return
	}
	r.turnQueueDepth.Set(float64(n))
}

// TurnStarted records how long a turn waited queued.
func (r *Registry) TurnStarted(wait time.Duration) {
	if r == nil {
		return
	}
	r.turnQueueWait.Observe(max(wait, 0).Seconds())
}

// TurnEnded records a turn's done outcome, its error code ("" for none) and,
// when timed, how long it ran.
func (r *Registry) TurnEnded(provider, outcome, code string, d time.Duration, timed bool) {
	if r == nil {
		return
	}
	r.turnsEnded.WithLabelValues(outcome, code).Inc()
	if timed { // a turn ended by start-up recovery has no duration of its own
		r.turnDuration.WithLabelValues(provider, outcome).Observe(max(d, 0).Seconds())
	}
}

// FramesAppended records the frames an ended turn committed.
func (r *Registry) FramesAppended(outcome string, n int) {
	if r == nil || n <= 0 {
		return
	}
	r.framesAppended.WithLabelValues(outcome).Add(float64(n))
}

// ProposalDecided records one proposal transition by its audit decision.
func (r *Registry) ProposalDecided(decision string) {
	if r == nil {
		return
	}
	r.proposals.WithLabelValues(decision).Inc()
}

// EffectAcknowledged records an effect's acknowledgement (or expiry).
func (r *Registry) EffectAcknowledged(status, kind string) {
	if r == nil {
		return
	}
	r.effectAcks.WithLabelValues(status, kind).Inc()
}

// ModelRetried records a retry of a model call after a failure with code.
func (r *Registry) ModelRetried(provider, code string) {
	if r == nil {
		return
	}
	r.modelRetries.WithLabelValues(provider, code).Inc()
}

// --- model calls (the provider decorator) -------------------------------------

// ModelFirstToken records the time to a call's first event.
func (r *Registry) ModelFirstToken(provider string, d time.Duration) {
	if r == nil {
		return
	}
	r.modelFirstToken.WithLabelValues(provider).Observe(max(d, 0).Seconds())
}

// ModelCall records a finished call: outcome is ok, error or cancelled, code
// the protocol error code of an error.
func (r *Registry) ModelCall(provider, outcome, code string, d time.Duration) {
	if r == nil {
		return
	}
	r.modelCalls.WithLabelValues(provider, outcome).Inc()
	r.modelDuration.WithLabelValues(provider, outcome).Observe(max(d, 0).Seconds())
	if outcome == OutcomeError {
		r.modelFailures.WithLabelValues(provider, code).Inc()
	}
}

// ModelTokens records the tokens a provider reported for one call.
func (r *Registry) ModelTokens(provider string, input, output int64) {
	if r == nil {
		return
	}
	if input > 0 {
		r.modelTokens.WithLabelValues(provider, "input").Add(float64(input))
	}
	if output > 0 {
		r.modelTokens.WithLabelValues(provider, "output").Add(float64(output))
	}
}

// Model call outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"
	OutcomeCancelled = "cancelled"
)

// --- StateDB -------------------------------------------------------------------

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
	var mu sync.Mutex
	var last float64
	r.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "studio_operator_proposals_pending",
		Help: "Proposals waiting for a person to confirm or deny them (all daemons on the database)."},
		func() float64 {
			mu.Lock()
			defer mu.Unlock()
			if n, err := pending(); err == nil {
				last = float64(n)
			}
			return last
		}))
}

// --- application ---------------------------------------------------------------

// RunStarted records a playbook run that began executing; call the
// returned function when it ends.
func (r *Registry) RunStarted() (ended func()) {
	if r == nil {
		return func() {}
	}
	r.runsRunning.Inc()
	return r.runsRunning.Dec
}

// RunFinished records a playbook run's final status and duration.
func (r *Registry) RunFinished(status string, d time.Duration) {
	if r == nil {
		return
	}
	r.runsFinished.WithLabelValues(status).Inc()
	r.runDuration.WithLabelValues(status).Observe(max(d, 0).Seconds())
}

// ScheduleFired records a launched schedule slot's lag behind its due time
// and the slots skipped on the way.
func (r *Registry) ScheduleFired(lag time.Duration, skipped int64) {
	if r == nil {
		return
	}
	if lag >= 0 {
		r.schedulerLag.Observe(lag.Seconds())
	}
	if skipped > 0 {
		r.schedulesSkip.Add(float64(skipped))
	}
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
