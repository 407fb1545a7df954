package coordinator

import (
	"time"

	"github.com/studio/operator/internal/protocol"
)

// Observer is told what the coordinator does, for metrics and logs. Its
// methods are called synchronously from the goroutine that did the work
// and must return quickly. NopObserver is the default; embed it to
// implement only some methods.
type Observer interface {
	// TurnEnded: a turn's done frame is durable.
	TurnEnded(TurnEnded)
	// QueueChanged: the number of new turns waiting for a worker changed.
	QueueChanged(depth int)
	// WorkerGranted: a turn (new or resumed after a decision) got a worker
	// after waiting Wait.
	WorkerGranted(WorkerGranted)
	// ModelAttempt: one call of the model provider ended.
	ModelAttempt(ModelAttempt)
	// ProposalDecided: a proposal moved (confirmed, executed, failed,
	// denied, expired, indeterminate).
	ProposalDecided(ProposalDecided)
	// EffectAcked: an effect was acknowledged (or found expired).
	EffectAcked(EffectAcked)
}

// TurnEnded describes an ended turn.
type TurnEnded struct {
	ConversationID string
	RequestID      string
	Outcome        protocol.Outcome
	ErrorCode      protocol.ErrorCode // "" when none
	Duration       time.Duration      // from acceptance (or adoption) to the durable done
	Frames         int                // frames this process appended for it
	// Recovered: a previous process left the turn unfinished and start-up
	// recovery ended it (failed, service_restarted). It has no Duration:
	// its time spans the restart.
	Recovered bool
}

// WorkerGranted describes a wait for a worker.
type WorkerGranted struct {
	Wait    time.Duration
	Resumed bool // a turn continuing after a proposal decision
}

// ModelAttempt describes one call of the provider.
type ModelAttempt struct {
	Provider         string
	Attempt          int           // 0 for the first try of a round
	TimeToFirstEvent time.Duration // 0 when no event came
	Duration         time.Duration
	ErrorCode        protocol.ErrorCode // "" on success
	Retried          bool               // the failure is retried
}

// ProposalDecided describes one proposal transition.
type ProposalDecided struct {
	CommandType string
	Risk        string
	Decision    protocol.Decision
}

// EffectAcked describes an acknowledgement.
type EffectAcked struct {
	Kind   string
	Status string // applied, rejected or expired
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) TurnEnded(TurnEnded)             {}
func (NopObserver) QueueChanged(int)                {}
func (NopObserver) WorkerGranted(WorkerGranted)     {}
func (NopObserver) ModelAttempt(ModelAttempt)       {}
func (NopObserver) ProposalDecided(ProposalDecided) {}
func (NopObserver) EffectAcked(EffectAcked)         {}
