package coordinator

import (
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Observer is told what the coordinator does, for metrics and logs. Its
// methods are called synchronously from the goroutine that did the work
// and must return quickly. NopObserver is the default; embed it to
// implement only some methods.
type Observer interface {
	// TurnAccepted: a new turn is durably accepted (before it starts).
	TurnAccepted(TurnAccepted)
	// TurnStarted: a turn got its worker and talks to the model (a new
	// one, one resumed after a decision, or one claimed from another
	// daemon's queue).
	TurnStarted(TurnStarted)
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

// TurnAccepted describes a turn just accepted.
type TurnAccepted struct {
	ConversationID string
	RequestID      string
	// Position is its place in the line for a worker (1 is next); 0 when
	// a worker took it at once.
	Position int
}

// TurnStarted describes a turn that got its worker.
type TurnStarted struct {
	ConversationID string
	RequestID      string
	QueueWait      time.Duration // how long it waited for the worker
	Resumed        bool          // it continues after a proposal decision
	Claimed        bool          // it was queued at another daemon
}

// TurnEnded describes an ended turn.
type TurnEnded struct {
	ConversationID string
	RequestID      string
	Model          string // the configured model's name; "" when unknown (recovery)
	Outcome        protocol.Outcome
	ErrorCode      protocol.ErrorCode // "" when none
	Error          string             // the failure's message, "" when none
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
	ConversationID   string
	RequestID        string
	Model            string        // the configured model's name (--provider NAME, or the kind)
	Attempt          int           // 0 for the first try of a round
	TimeToFirstEvent time.Duration // 0 when no event came
	Duration         time.Duration
	ErrorCode        protocol.ErrorCode // "" on success
	Error            string             // the failure's message (the provider's words, redacted); "" on success
	Retried          bool               // the failure is retried
}

// ProposalDecided describes one proposal transition.
type ProposalDecided struct {
	ProposalID     string
	ConversationID string
	RequestID      string
	CommandType    string
	Risk           string
	Decision       protocol.Decision
}

// EffectAcked describes an acknowledgement.
type EffectAcked struct {
	Kind   string
	Status string // applied, rejected or expired
}

func decidedOf(p store.Proposal, d protocol.Decision) ProposalDecided {
	return ProposalDecided{ProposalID: p.ID, ConversationID: p.ConversationID, RequestID: p.RequestID,
		CommandType: p.CommandType, Risk: p.Risk, Decision: d}
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) TurnAccepted(TurnAccepted)       {}
func (NopObserver) TurnStarted(TurnStarted)         {}
func (NopObserver) TurnEnded(TurnEnded)             {}
func (NopObserver) QueueChanged(int)                {}
func (NopObserver) WorkerGranted(WorkerGranted)     {}
func (NopObserver) ModelAttempt(ModelAttempt)       {}
func (NopObserver) ProposalDecided(ProposalDecided) {}
func (NopObserver) EffectAcked(EffectAcked)         {}

// Observers fans every event out to each observer in turn: metrics and the
// recent-activity ring observe the same coordinator.
func Observers(obs ...Observer) Observer { return fanout(obs) }

type fanout []Observer

func (f fanout) TurnAccepted(e TurnAccepted) {
	for _, o := range f {
		o.TurnAccepted(e)
	}
}

func (f fanout) TurnStarted(e TurnStarted) {
	for _, o := range f {
		o.TurnStarted(e)
	}
}

func (f fanout) TurnEnded(e TurnEnded) {
	for _, o := range f {
		o.TurnEnded(e)
	}
}

func (f fanout) QueueChanged(depth int) {
	for _, o := range f {
		o.QueueChanged(depth)
	}
}

func (f fanout) WorkerGranted(e WorkerGranted) {
	for _, o := range f {
		o.WorkerGranted(e)
	}
}

func (f fanout) ModelAttempt(e ModelAttempt) {
	for _, o := range f {
		o.ModelAttempt(e)
	}
}

func (f fanout) ProposalDecided(e ProposalDecided) {
	for _, o := range f {
		o.ProposalDecided(e)
	}
}

func (f fanout) EffectAcked(e EffectAcked) {
	for _, o := range f {
		o.EffectAcked(e)
	}
}
