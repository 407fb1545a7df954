package coordinator

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// Approval requests: a command a person asked for directly (cockpit, CLI,
// API) that the policy allows only with a second approver. It does not
// run on one person's word; it becomes a pending proposal of a
// conversation of its own, made by a turn with no model (the agent's
// machinery, agents.go), so it is hashed, version-checked, expired,
// fenced, audited, announced (proposal.pending) and decided exactly as a
// model's proposal: another principal confirms or denies it, and it
// executes at most once. The requester is the turn's submitter, hence
// the proposal's author: four-eyes refuses their own confirm.

// directNamespace derives an approval request's conversation id from its
// requester and idempotency key: the same key finds the same request.
var directNamespace = uuid.MustParse("9d3b7f52-1c8e-4a0b-b6d4-2f7e91c05a3e")

// directAsk is who asked for a direct command.
type directAsk struct{ requester string }

// ApprovalRequest is a direct command to be decided by another principal.
type ApprovalRequest struct {
	Command studio.Command
	// IdempotencyKey, when set, names the request: the same requester
	// sending the same key gets the same request back (Existing), in any
	// state; with another command it is conflict.
	IdempotencyKey string
}

// maxIdempotencyKey bounds an Idempotency-Key.
const maxIdempotencyKey = 255

// RequestApproval makes a direct command a pending proposal awaiting a
// second approver, in a new conversation owned by the requester (the
// request's principal) and visible to the team, and returns it once it is
// stored.
func (c *Coordinator) RequestApproval(ctx context.Context, ar ApprovalRequest) (AgentProposal, error) {
	who, ok := protocol.PrincipalFrom(ctx)
	if !ok || who.ID == "" {
		return AgentProposal{}, protocol.Errorf(protocol.AuthRequired, "an approval request needs a principal")
	}
	if len(ar.IdempotencyKey) > maxIdempotencyKey {
		return AgentProposal{}, protocol.Errorf(protocol.Validation, "Idempotency-Key is longer than %d bytes", maxIdempotencyKey).
			With("field", "Idempotency-Key")
	}
	if c.cfg.Commands == nil || c.cfg.Tools == nil {
		return AgentProposal{}, protocol.Errorf(protocol.Denied, "commands cannot be proposed here")
	}
	// Prepared once at this door (its turn prepares it again when it stores
	// the proposal, against the state of that moment, as every turn does).
	prep, err := c.cfg.Commands.Prepare(ctx, ar.Command)
	if err != nil {
		return AgentProposal{}, err
	}
	spec, err := c.commandTool(prep.Type)
	if err != nil {
		return AgentProposal{}, err
	}
	id := uuid.NewString()
	if ar.IdempotencyKey != "" {
		id = uuid.NewSHA1(directNamespace, []byte(who.ID+"\x00"+ar.IdempotencyKey)).String()
	}
	title := "Approval request: " + prep.Summary
	conv, err := c.ensureConversation(ctx, store.CreateConversationParams{ID: id, Title: &title, Owner: who.Name,
		Visibility: protocol.VisibilityTeam, Now: c.now()})
	if err != nil {
		return AgentProposal{}, err
	}
	if conv.Owner != who.Name {
		return AgentProposal{}, protocol.Errorf(protocol.Conflict, "this Idempotency-Key names another principal's request")
	}
	prev, err := c.store.ListProposals(ctx, store.ListProposalsParams{ConversationID: conv.ID, Limit: 1})
	if err != nil {
		return AgentProposal{}, err
	}
	if len(prev) > 0 {
		p := prev[0]
		if p.CommandType != prep.Type || string(p.Command) != string(prep.Canonical) {
			return AgentProposal{}, protocol.Errorf(protocol.Conflict,
				"Idempotency-Key %q was used for another command (proposal %s)", ar.IdempotencyKey, p.ID).
				With("proposalId", p.ID).With("field", "Idempotency-Key")
		}
		return AgentProposal{Proposal: proposalView(p), Existing: true}, nil
	}
	if conv.Status != store.ConversationActive {
		return AgentProposal{}, protocol.Errorf(protocol.Conflict, "this approval request's conversation is %s", conv.Status)
	}
	return c.proposePrepared(ctx, AgentCommand{ConversationID: conv.ID,
		Client: fmt.Sprintf("approval request of %s", who.Name), Direct: &directAsk{requester: who.Name}}, spec.ID, prep)
}
