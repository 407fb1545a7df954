package coordinator

import (
	"context"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// Amending a proposal: the operator edits the arguments of a
// pending proposal's command. The edit is a decision like confirm and deny,
// made by the turn's owner (one owner per turn): the amended command is
// validated against the current state exactly like a model's (Prepare),
// then the original is cancelled with reason amended (its D8 audit row:
// decision denied, error_code amended) and the amended command becomes a
// new proposal — its own hash, idempotency key, expiry and audit trail,
// linked to the original (amends / amended_from, and an AmendAction audit
// row) — in one transaction. It answers the model's same tool call, so whatever happens
// to it (executed, failed, denied, expired) is what the model is told, with
// the command that ran. The turn keeps waiting for a human: the operator
// confirms the amended proposal with its new hash.

// AmendProposal replaces a pending proposal with the operator's edited
// command and answers the new, pending proposal.
func (c *Coordinator) AmendProposal(ctx context.Context, convID, proposalID string, req protocol.AmendProposalRequest) (protocol.ProposalState, error) {
	if req.ExpectedCommandHash == "" {
		return protocol.ProposalState{}, protocol.Errorf(protocol.Validation, "expectedCommandHash is required").With("field", "expectedCommandHash")
	}
	if !req.Command.IsValid() || req.Command.Kind() != '{' {
		return protocol.ProposalState{}, protocol.Errorf(protocol.Validation, "command must be a JSON object of the proposal's command type").With("field", "command")
	}
	if pe := c.leaseErr(); pe != nil {
		return protocol.ProposalState{}, pe
	}
	p, err := c.readProposal(ctx, convID, proposalID)
	if err != nil {
		return protocol.ProposalState{}, err
	}
	if req.ExpectedCommandHash != p.CommandHash {
		return protocol.ProposalState{}, protocol.Errorf(protocol.Conflict, "the command hash does not match the proposal; refresh it").
			With("proposalId", p.ID)
	}
	cmd, err := studio.DecodeCommand(p.CommandType, req.Command)
	if err != nil {
		if protocol.CodeOf(err) == "" {
			err = protocol.Errorf(protocol.Validation, "%v", err).With("field", "command")
		}
		return protocol.ProposalState{}, err
	}
	reply, err := c.sendDecisionRequest(ctx, p, decisionRequest{kind: decideAmend, proposalID: p.ID, amended: cmd})
	if err != nil {
		return protocol.ProposalState{}, err
	}
	if reply == nil {
		_, err := notPendingAnswer(decideAmend, p)
		return protocol.ProposalState{}, err
	}
	select {
	case r := <-reply:
		if r.err != nil {
			return protocol.ProposalState{}, r.err
		}
		if r.amended == nil {
			return protocol.ProposalState{}, protocol.Errorf(protocol.Conflict, "proposal %s is %s; only a pending proposal can be amended", p.ID, r.result.Status).
				With("status", string(r.result.Status))
		}
		return proposalView(*r.amended), nil
	case <-ctx.Done():
		return protocol.ProposalState{}, ctx.Err()
	}
}

// amend is the owner's transition for an amendment of pending proposal p
// (parked, not expired): the owner stays parked, now for the new proposal.
func (o *owner) amend(ctx context.Context, r decisionRequest, p store.Proposal) {
	c := o.c
	fail := func(err error) { r.reply <- decisionReply{err: err} }
	conv, err := c.store.GetConversation(ctx, p.ConversationID)
	if err != nil {
		fail(err)
		return
	}
	if conv.Status != store.ConversationActive {
		fail(protocol.Errorf(protocol.Conflict, "the conversation is archived; its proposals can no longer be amended"))
		return
	}
	if c.cfg.Commands == nil {
		fail(protocol.Errorf(protocol.Denied, "commands cannot be proposed here"))
		return
	}
	prep, err := c.cfg.Commands.Prepare(ctx, r.amended)
	if err != nil {
		fail(err)
		return
	}
	if prep.Type != p.CommandType {
		fail(protocol.Errorf(protocol.Validation, "an amended command keeps the proposal's command type %s", p.CommandType).With("field", "command"))
		return
	}
	if same, err := protocol.CommandHash(p.Command); err == nil && same == prep.Hash {
		fail(protocol.Errorf(protocol.Validation, "the amended command is the proposal's own; confirm the proposal instead").With("field", "command"))
		return
	}
	now := c.now()
	np, err := c.newProposal(prep, p.ConversationID, p.RequestID, p.CallID, now)
	if err != nil {
		fail(err)
		return
	}
	np.SubmittedBy = r.by // an amendment is its amender's command: four-eyes asks another principal to confirm it
	out, err := c.amendProposal(ctx, amendParams{proposal: p, amended: np, by: r.by, now: now})
	if err != nil {
		fail(err)
		return
	}
	o.frames += 3
	r.reply <- decisionReply{amended: &out}
}
