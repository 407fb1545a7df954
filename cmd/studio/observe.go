package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/logrepeat"
	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlstore"
)

// coordObserver turns what the coordinator reports into metrics and the
// log lines of a turn's life (accepted, queued, started, each model
// attempt, ended) and of each proposal decision, every one with its
// conversation and request ids. Model call timing is not taken from here:
// the provider decorator measures every call (turns and runs alike).
type coordObserver struct {
	reg *metrics.Registry
	log *slog.Logger
}

var _ coordinator.Observer = coordObserver{}

func (o coordObserver) TurnAccepted(e coordinator.TurnAccepted) {
	o.log.Info("turn accepted", "conversation", e.ConversationID, "request", e.RequestID)
	if e.Position > 0 {
		o.log.Info("turn queued", "conversation", e.ConversationID, "request", e.RequestID, "position", e.Position)
	}
}

func (o coordObserver) TurnStarted(e coordinator.TurnStarted) {
	o.log.Info("turn started", "conversation", e.ConversationID, "request", e.RequestID,
		"queue_wait", e.QueueWait, "resumed", e.Resumed, "claimed", e.Claimed)
}

func (o coordObserver) TurnEnded(e coordinator.TurnEnded) {
	o.reg.TurnEnded(e.Model, string(e.Outcome), string(e.ErrorCode), e.Duration, !e.Recovered)
	o.reg.FramesAppended(string(e.Outcome), e.Frames)
	attrs := []any{"conversation", e.ConversationID, "request", e.RequestID, "model", e.Model, "outcome", string(e.Outcome),
		"frames", e.Frames, "duration", e.Duration, "recovered", e.Recovered}
	if e.ErrorCode != "" {
		attrs = append(attrs, "error_code", string(e.ErrorCode))
	}
	if e.Error != "" {
		attrs = append(attrs, "err", redact.Text(e.Error))
	}
	o.log.Info("turn ended", attrs...)
}

func (o coordObserver) QueueChanged(depth int) { o.reg.TurnQueueDepth(depth) }

func (o coordObserver) WorkerGranted(w coordinator.WorkerGranted) {
	if !w.Resumed { // a resumed turn waited for a person, not in the queue
		o.reg.TurnStarted(w.Wait)
	}
}

func (o coordObserver) ModelAttempt(a coordinator.ModelAttempt) {
	if a.Retried {
		o.reg.ModelRetried(a.Model, string(a.ErrorCode))
	}
	attrs := []any{"conversation", a.ConversationID, "request", a.RequestID, "model", a.Model, "attempt", a.Attempt + 1,
		"duration", a.Duration, "time_to_first_event", a.TimeToFirstEvent}
	if a.ErrorCode != "" {
		attrs = append(attrs, "error_code", string(a.ErrorCode), "retried", a.Retried, "err", redact.Text(a.Error))
	}
	o.log.Info("model attempt", attrs...)
}

func (o coordObserver) ProposalDecided(p coordinator.ProposalDecided) {
	o.reg.ProposalDecided(string(p.Decision))
	o.log.Info("proposal decided", "proposal", p.ProposalID, "conversation", p.ConversationID, "request", p.RequestID,
		"command_type", p.CommandType, "risk", p.Risk, "decision", string(p.Decision))
}

func (o coordObserver) EffectAcked(e coordinator.EffectAcked) {
	o.reg.EffectAcknowledged(e.Status, e.Kind)
}

// observeStore sends StateDB's operation timings and group-commit writer
// figures to the metrics, and counts the pending proposals at each scrape.
func observeStore(st database, reg *metrics.Registry) {
	if o, ok := st.stateDB.(interface {
		Observe(sqlstore.Observer)
		WriterOldestWait() time.Duration
	}); ok {
		o.Observe(reg)
		reg.ObserveWriter(o.WriterOldestWait)
	}
	reg.ObservePendingProposals(func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ps, err := st.ListProposals(ctx, store.ListProposalsParams{Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 100_000})
		return len(ps), err
	})
}

// flushLog writes the summaries of failures still repeating (at exit).
func flushLog(log *slog.Logger) {
	if h, ok := log.Handler().(*logrepeat.Handler); ok {
		h.Flush()
	}
}

// newLogger builds the daemon's structured logger on w. Every duration
// is written as seconds, a float (0.0123), in both formats: slog's JSON
// handler would write Go's raw nanoseconds and its text handler a Go
// duration string, and one unit everywhere is what a log query can rely on.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationSeconds}
	var h slog.Handler
	switch format {
	case "text", "":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: use text or json", format)
	}
	h = redact.Handler(h)
	// A failure that repeats (a loop retrying while the database is
	// down) is one line and a summary, not a line per try.
	return slog.New(logrepeat.New(h, logrepeat.Options{})), nil
}

// durationSeconds rewrites a duration attribute as seconds.
func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	}
	return a
}
