package httpapi

import (
	"context"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/tools"
)

// The services the handlers call, each as narrow as the handlers that use
// it: the server depends on what it asks of the engine, not on the engine
// (cmd/studio wires the coordinator and the conversation service in), so a
// test of an HTTP concern can hand it a small fake.

// Conversations keeps conversations: the conversation routes, and the
// conversation a request's authorization decides on.
type Conversations interface {
	CreateConversation(ctx context.Context, req protocol.CreateConversationRequest) (protocol.Conversation, error)
	ListConversations(ctx context.Context, q conversations.ListQuery) (protocol.ConversationList, error)
	UpdateConversation(ctx context.Context, id string, req protocol.UpdateConversationRequest) (protocol.Conversation, error)
	DeleteConversation(ctx context.Context, id string) (protocol.Conversation, error)
	RestoreConversation(ctx context.Context, id string) (protocol.Conversation, error)
	ForkConversation(ctx context.Context, id string, req protocol.ForkRequest) (protocol.ConversationPage, error)
	Page(ctx context.Context, convID string, after int64, limit int) (protocol.ConversationPage, error)
	ReportView(ctx context.Context, convID string, r protocol.ViewReport) (protocol.ViewAccepted, error)
	// PolicyResource is the conversation as the policy gate sees it.
	PolicyResource(ctx context.Context, id string) (policy.Conversation, error)
}

// Streams serves a conversation's frames as they are written, and the
// tickets that open a stream without a bearer header.
type Streams interface {
	// OpenStream checks the conversation and after; last is its newest
	// frame's sequence.
	OpenStream(ctx context.Context, convID string, after int64) (last int64, err error)
	ReadFrames(ctx context.Context, convID string, after int64, limit int) ([]protocol.RawFrame, error)
	Subscribe(convID string) *feed.Subscription
	// AccessSignal is closed when access may have changed (a principal,
	// a policy): open streams check theirs again.
	AccessSignal() <-chan struct{}
	CreateStreamTicket(ctx context.Context, req protocol.StreamTicketRequest, minter store.TicketMinter) (protocol.StreamTicket, error)
	RedeemStreamTicket(ctx context.Context, ticket, convID string, after int64) (store.TicketMinter, error)
}

// Turns runs the operator's turns.
type Turns interface {
	SubmitTurn(ctx context.Context, convID string, req protocol.TurnRequest) (protocol.TurnAccepted, error)
	CancelTurn(ctx context.Context, convID, requestID string) (protocol.Turn, error)
	ActiveTurn(ctx context.Context, convID string) (*protocol.TurnProgress, error)
	ActiveTurnAfter(ctx context.Context, convID string, after int64) (*protocol.TurnProgress, error)
	// ProgressSignal is closed when the conversation's turn progress
	// changes.
	ProgressSignal(convID string) <-chan struct{}
}

// Proposals keeps the operator's proposals and decides them.
type Proposals interface {
	ListProposals(ctx context.Context, q coordinator.ProposalQuery) ([]protocol.ProposalState, error)
	GetProposal(ctx context.Context, convID, proposalID string) (protocol.ProposalState, error)
	FindProposal(ctx context.Context, proposalID string) (protocol.ProposalState, error)
	PendingProposals(ctx context.Context, convID, requestID string) ([]policy.Proposal, error)
	AmendProposal(ctx context.Context, convID, proposalID string, req protocol.AmendProposalRequest) (protocol.ProposalState, error)
	Confirm(ctx context.Context, convID, proposalID string, req protocol.ConfirmProposalRequest) (protocol.ProposalResult, error)
	Deny(ctx context.Context, convID, proposalID string) (protocol.ProposalResult, error)
	// ProposalResource is the proposal as the policy gate sees it.
	ProposalResource(ctx context.Context, convID, proposalID string) (policy.Proposal, error)
	// RequestApproval makes a direct command that needs a second approver
	// a pending proposal (an approval request).
	RequestApproval(ctx context.Context, ar coordinator.ApprovalRequest) (coordinator.AgentProposal, error)
}

// Effects answers a confirmed proposal's effect: its state, and the
// cockpit's acknowledgement that it applied it.
type Effects interface {
	AckEffect(ctx context.Context, convID, effectID string, req protocol.AckEffectRequest) (protocol.EffectState, error)
	EffectState(ctx context.Context, convID, effectID string) (protocol.EffectState, error)
}

// Catalog is what the operator can use: its models, routes and tools.
type Catalog interface {
	ListModels(ctx context.Context) protocol.ModelList
	Routes() *spaces.Registry
	Tools() *tools.Registry
}
