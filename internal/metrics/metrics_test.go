package metrics_test

import (
	"context"
	"io"
	"iter"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// fakeProvider plays events, then an optional error.
type fakeProvider struct {
	events []model.Event
	err    error
}

func (fakeProvider) Name() string { return "fake" }

func (f fakeProvider) Stream(context.Context, model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		for _, ev := range f.events {
			if !yield(ev, nil) {
				return
			}
		}
		if f.err != nil {
			yield(model.Event{}, f.err)
		}
	}
}

type checkedFake struct{ fakeProvider }

func (checkedFake) Check(context.Context) error {
	return protocol.Errorf(protocol.ModelFailure, "down")
}

func scrape(t *testing.T, r *metrics.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestInstrumentProvider: calls, first tokens, failures by code and tokens
// are recorded under the configured model's name ("local"), not the
// provider's kind ("fake"); usage events are consumed; a health check
// survives the wrap.
func TestInstrumentProvider(t *testing.T) {
	t.Parallel()
	r := metrics.New(metrics.Build{Version: "test"})
	ok := metrics.InstrumentProvider(fakeProvider{events: []model.Event{
		{Kind: model.EventText, Text: "hi"}, {Kind: model.EventUsage, Usage: model.Usage{InputTokens: 10, OutputTokens: 3}}}}, "local", r)
	text, err := model.Complete(context.Background(), ok, model.Request{})
	if err != nil || text != "hi" {
		t.Fatalf("complete: %q %v", text, err)
	}
	for ev, err := range ok.Stream(context.Background(), model.Request{}) {
		if err != nil || ev.Kind == model.EventUsage {
			t.Fatalf("the decorator passed on %+v, %v", ev, err)
		}
	}
	failing := metrics.InstrumentProvider(fakeProvider{err: protocol.Errorf(protocol.RateLimited, "slow down")}, "local", r)
	if _, err := model.Complete(context.Background(), failing, model.Request{}); !protocol.IsCode(err, protocol.RateLimited) {
		t.Fatalf("error %v", err)
	}
	if _, isChecker := ok.(model.Checker); isChecker {
		t.Fatal("a provider without a health check gained one")
	}
	c, isChecker := metrics.InstrumentProvider(checkedFake{}, "fake", r).(model.Checker)
	if !isChecker || c.Check(context.Background()) == nil {
		t.Fatal("the health check was lost")
	}
	body := scrape(t, r)
	for _, want := range []string{
		`studio_model_calls_total{outcome="ok",provider="local"} 2`,
		`studio_model_calls_total{outcome="error",provider="local"} 1`,
		`studio_model_failures_total{code="rate_limited",provider="local"} 1`,
		`studio_model_time_to_first_token_seconds_count{provider="local"} 2`,
		`studio_model_tokens_total{direction="input",provider="local"} 20`,
		`studio_model_tokens_total{direction="output",provider="local"} 6`,
		`studio_build_info{goversion="go`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
}

// A nil registry records nothing and does not panic: callers need not check.
func TestNilRegistry(t *testing.T) {
	t.Parallel()
	var r *metrics.Registry
	r.HTTPRequest("GET", "/", 200, 0, false)
	r.TurnEnded("p", "completed", "", 0, true)
	r.RunStarted()()
	r.ScheduleFired(0, 1)
	if p := metrics.InstrumentProvider(fakeProvider{}, "fake", nil); p.Name() != "fake" {
		t.Fatal("a nil registry changed the provider")
	}
}

// TestStoreStreamAndProposalFamilies: StateDB operation latency, the
// group-commit writer's batch size, queue wait and oldest wait, the SSE
// stream lifetime and the pending proposals are exposed; the goroutine
// count is go_goroutines alone (no studio_ duplicate).
func TestStoreStreamAndProposalFamilies(t *testing.T) {
	t.Parallel()
	r := metrics.New(metrics.Build{Version: "test"})
	r.StoreOperation("append_frames", 3*time.Millisecond)
	r.WriterBatch(7)
	r.WriterQueueWait(time.Millisecond)
	r.ObserveWriter(func() time.Duration { return 1500 * time.Millisecond })
	r.StreamClosed("client_gone", 90*time.Second)
	pending, fail := 4, false
	r.ObservePendingProposals(func() (int, error) {
		if fail {
			return 0, context.DeadlineExceeded
		}
		return pending, nil
	})
	body := scrape(t, r)
	for _, want := range []string{
		`studio_store_operation_duration_seconds_count{operation="append_frames"} 1`,
		`studio_store_operation_duration_seconds_bucket{operation="append_frames",le="0.005"} 1`,
		"studio_store_writer_batch_size_sum 7",
		"studio_store_writer_queue_wait_seconds_count 1",
		"studio_store_writer_oldest_wait_seconds 1.5",
		`studio_operator_stream_duration_seconds_bucket{reason="client_gone",le="300"} 1`,
		`studio_operator_stream_duration_seconds_bucket{reason="client_gone",le="60"} 0`,
		"studio_operator_proposals_pending 4",
		"\ngo_goroutines ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
	if strings.Contains(body, "studio_go_goroutines") {
		t.Error("studio_go_goroutines duplicates go_goroutines")
	}
	// A count that fails keeps the last value rather than dropping to 0.
	fail = true
	if body := scrape(t, r); !strings.Contains(body, "studio_operator_proposals_pending 4") {
		t.Error("a failed count changed the pending proposals gauge")
	}
}

// TestReadinessGauge: studio_ready follows the readiness check at each
// scrape.
func TestReadinessGauge(t *testing.T) {
	t.Parallel()
	r := metrics.New(metrics.Build{Version: "test"})
	ready := true
	r.ObserveReadiness(func() bool { return ready })
	if body := scrape(t, r); !strings.Contains(body, "\nstudio_ready 1\n") {
		t.Errorf("ready: the exposition lacks studio_ready 1")
	}
	ready = false
	if body := scrape(t, r); !strings.Contains(body, "\nstudio_ready 0\n") {
		t.Errorf("not ready: the exposition lacks studio_ready 0")
	}
}
