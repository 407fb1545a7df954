package store

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
)

// ProposalStatus is a proposal's state (docs/design.md §9).
type ProposalStatus string

// Proposal states. confirmed is never at rest: confirmation moves a proposal
// to executing in the transaction that audits it.
const (
	ProposalPending   ProposalStatus = "pending"
	ProposalConfirmed ProposalStatus = "confirmed"
	ProposalExecuting ProposalStatus = "executing"
	ProposalSucceeded ProposalStatus = "succeeded"
	ProposalFailed    ProposalStatus = "failed"
	ProposalExpired   ProposalStatus = "expired"
	ProposalCancelled ProposalStatus = "cancelled"
	ProposalConflict  ProposalStatus = "conflict"
)

// Terminal reports whether no transition leaves s.
func (s ProposalStatus) Terminal() bool {
	switch s {
	case ProposalSucceeded, ProposalFailed, ProposalExpired, ProposalCancelled, ProposalConflict:
		return true
	}
	return false
}

// Proposal is a row of studio_operator_proposals.
type Proposal struct {
	ID             string
	ConversationID string
	RequestID      string
	CallID         string // the model tool call it answers
	CommandType    string
	Command        jsontext.Value // canonical JSON
	CommandHash    string
	Target         *protocol.ResourceVersion
	Risk           string
	Impact         string // "", destructive or irreversible
	TargetName     string // the target's human name when proposed ("" when none)
	Summary        string
	IdempotencyKey string
	Status         ProposalStatus
	ExpiresAt      time.Time
	ConfirmedAt    *time.Time
	CompletedAt    *time.Time
	Result         jsontext.Value
	ErrorCode      *string
	CreatedAt      time.Time
	// AmendedFrom is the proposal this one amends (the operator edited its
	// command); it answers the same tool call.
	AmendedFrom *string
	// Owner is the instance that executes it once confirmed ("" before,
	// and once its outcome became unknown with its executor), and Epoch
	// how many times the owner changed: the execution's fence (fence.go).
	Owner string
	Epoch int64
	// ExecutedAt is when the command's own write committed (fenced
	// executions only: Fence.Execute); nil before. ExecutedAuditID is the
	// admin_events row that write appended (0: none, or a write from
	// before it was kept): what the command did, for a daemon that takes
	// the proposal over without its result.
	ExecutedAt      *time.Time
	ExecutedAuditID int64
	// SubmittedBy is the principal (name) whose action produced it: the
	// one that amended it when set on create, else copied from its turn's
	// submitter; DecidedBy the principal that confirmed or denied it (""
	// for none, and for rows from before principals).
	SubmittedBy string
	DecidedBy   string
	// Project is the project of the resource the command changes or
	// creates ("" when none, and for rows from before it was kept).
	Project string
	// Origin is protocol.ProposalOriginTurn or ProposalOriginRequest (a
	// person's direct command awaiting a second approver); "" on create
	// is a turn's.
	Origin string
}

// ProposalStore keeps proposals. Every audited transition (docs/design.md §10)
// appends its admin_events row, its frames and any turn transition in the
// same transaction: a proposal never changes without its audit row. A
// transition's frames are the proposal request's and need it to be the
// conversation's active turn (conflict otherwise); like AppendFrames they may
// not carry done (validation). A transition that cannot append its frames
// changes nothing.
type ProposalStore interface {
	// CreateProposal inserts a pending proposal and appends its proposal and
	// confirmation(required) frames; only the active request may propose.
	CreateProposal(ctx context.Context, p CreateProposalParams) (Proposal, error)
	GetProposal(ctx context.Context, id string) (Proposal, error)
	ListProposals(ctx context.Context, p ListProposalsParams) ([]Proposal, error)
	// ConfirmProposal moves pending to executing, appends the confirmed
	// audit row and frames. A proposal that is not pending is conflict
	// (details.status names its state).
	ConfirmProposal(ctx context.Context, p ConfirmProposalParams) (Proposal, error)
	// FinishProposal moves executing to succeeded or failed with the result,
	// the audit row and frames, and resumes an awaiting turn.
	FinishProposal(ctx context.Context, p FinishProposalParams) (Proposal, bool, error)
	// CloseProposal moves pending to cancelled, expired or conflict with the
	// audit row and frames, and resumes an awaiting turn.
	CloseProposal(ctx context.Context, p CloseProposalParams) (Proposal, bool, error)
	// AmendProposal replaces a pending proposal with the operator's amended
	// command: the original moves to cancelled with error code amended and
	// its audit row, the new one (AmendedFrom set, same request and call)
	// is inserted pending, with the confirmation(amended), proposal and
	// confirmation(required) frames and the Link audit row, in one
	// transaction. The turn stays
	// waiting for a human. A proposal that is not pending is conflict.
	AmendProposal(ctx context.Context, p AmendProposalParams) (Proposal, error)
	// AwaitConfirmation parks a running turn while one of its proposals is
	// pending or executing; it reports whether the turn parked. A parked
	// turn has no owner (any daemon may continue it), unless its proposal
	// executes: then the proposal's executor owns it.
	AwaitConfirmation(ctx context.Context, p AwaitConfirmationParams) (bool, error)
}

// CreateProposalParams stores a new proposal.
type CreateProposalParams struct {
	Proposal Proposal
	Now      time.Time
	// Audit, if set, is an audit row written in the proposal's
	// transaction (an outside agent's proposal names its author there):
	// the proposal is not stored without it.
	Audit *AppendAdminEventParams
}

// ListProposalsParams filters proposals, newest first.
type ListProposalsParams struct {
	ConversationID string
	RequestID      string
	Statuses       []ProposalStatus
	Limit          int
	// VisibleTo, when set, keeps the proposals of conversations the
	// principal of that name may see (ListConversationsParams.VisibleTo).
	VisibleTo string
}

// ConfirmProposalParams confirms a pending proposal.
type ConfirmProposalParams struct {
	ID     string
	Audit  AppendAdminEventParams
	Frames []NewFrame
	Now    time.Time
	// Instance executes it: it owns the proposal, and the turn while the
	// turn awaits confirmation.
	Instance string
	// DecidedBy is the confirming principal's name ("" for none).
	DecidedBy string
}

// FinishProposalParams records an executed proposal's outcome.
type FinishProposalParams struct {
	ID        string
	Status    ProposalStatus // succeeded or failed
	Result    jsontext.Value
	ErrorCode *string
	Audit     AppendAdminEventParams
	// Also, when set, is a second audit row in the same transaction (the
	// application's own row when a reconciliation settles the proposal).
	Also   *AppendAdminEventParams
	Frames []NewFrame
	Now    time.Time
	// Instance owns the turn it resumes.
	Instance string
}

// CloseProposalParams ends a pending proposal without executing it.
type CloseProposalParams struct {
	ID        string
	Status    ProposalStatus // cancelled, expired or conflict
	ErrorCode *string
	Audit     AppendAdminEventParams
	Frames    []NewFrame
	Now       time.Time
	// Instance owns the turn it resumes.
	Instance string
	// DecidedBy is the denying principal's name ("" for none: an expiry,
	// a stale target, a cancelled turn).
	DecidedBy string
}

// AmendProposalParams amends a pending proposal.
type AmendProposalParams struct {
	ID       string   // the original
	Proposal Proposal // the amended one
	// Audit is the original's close (its D8 row); Link the row that
	// records which proposal replaced it.
	Audit AppendAdminEventParams
	Link  AppendAdminEventParams
	Now   time.Time
}

// AwaitConfirmationParams parks a turn.
type AwaitConfirmationParams struct {
	RequestID string
}
