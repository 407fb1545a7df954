package main

import (
	"log/slog"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/metrics"
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
		attrs = append(attrs, "error_code", string(a.ErrorCode), "retried", a.Retried)
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
