package main

import (
	"log/slog"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/metrics"
)

// coordObserver turns what the coordinator reports into metrics and the
// per-turn and per-proposal log lines. Model call timing is not taken from
// here: the provider decorator measures every call (turns and runs alike).
type coordObserver struct {
	reg      *metrics.Registry
	log      *slog.Logger
	provider string
}

var _ coordinator.Observer = coordObserver{}

func (o coordObserver) TurnEnded(e coordinator.TurnEnded) {
	o.reg.TurnEnded(o.provider, string(e.Outcome), string(e.ErrorCode), e.Duration, !e.Recovered)
	o.reg.FramesAppended(string(e.Outcome), e.Frames)
	attrs := []any{"conversation", e.ConversationID, "request", e.RequestID, "outcome", string(e.Outcome),
		"frames", e.Frames, "duration", e.Duration, "recovered", e.Recovered}
	if e.ErrorCode != "" {
		attrs = append(attrs, "error_code", string(e.ErrorCode))
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
		o.reg.ModelRetried(a.Provider, string(a.ErrorCode))
	}
}

func (o coordObserver) ProposalDecided(p coordinator.ProposalDecided) {
	o.reg.ProposalDecided(string(p.Decision))
	o.log.Info("proposal decided", "command_type", p.CommandType, "risk", p.Risk, "decision", string(p.Decision))
}

func (o coordObserver) EffectAcked(e coordinator.EffectAcked) {
	o.reg.EffectAcknowledged(e.Status, e.Kind)
}
