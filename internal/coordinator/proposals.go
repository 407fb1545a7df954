package coordinator

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// The proposal lifecycle (docs/design.md §9, §10). A proposal is made by its
// turn's owner (propose, here) and every later transition is made by that
// owner too (parked.go's decisions, confirm.go; ending.go closes what is left
// open), with one function per transition in transitions.go. Here too: the
// reads and the wire views of proposals.

// propose turns a command tool's output into a pending proposal
// (docs/design.md §9.3, steps 1-2): the command is validated against the
// current state by the application (a command that could not run is the
// tool's validation, not_found or conflict result, and no proposal), then
// stored with its canonical hash, target, summary, risk, a fresh idempotency
// key and expiry, and its proposal and confirmation(required) frames. If it
// cannot be stored the tool answers audit_unavailable and nothing will
// execute.
func (o *owner) propose(callID string, cmd studio.Command) error {
	c, t := o.c, o.turn
	if c.cfg.Commands == nil {
		return protocol.Errorf(protocol.Denied, "commands cannot be proposed here")
	}
	open, err := c.store.ListProposals(o.ctx, store.ListProposalsParams{RequestID: t.RequestID,
		Statuses: []store.ProposalStatus{store.ProposalPending, store.ProposalExecuting}, Limit: 1})
	if err != nil {
		return c.auditUnavailable("read proposals", err)
	}
	if len(open) > 0 {
		return protocol.Errorf(protocol.Conflict, "proposal %s of this turn still awaits the operator; propose one change at a time", open[0].ID).
			With("proposalId", open[0].ID)
	}
	prep, err := c.cfg.Commands.Prepare(o.ctx, cmd)
	if err != nil {
		return err
	}
	if err := o.refuseDenied(prep); err != nil {
		return err
	}
	now := c.now()
	p, err := c.newProposal(prep, t.ConversationID, t.RequestID, callID, now)
	if err != nil {
		return err
	}
	var audit *store.AppendAdminEventParams
	if a := o.agentCall(); a != nil {
		if audit, err = agentProposalAudit(p, t.SubmittedBy, a, now); err != nil {
			return err
		}
		if a.Direct {
			p.Origin = protocol.ProposalOriginRequest
		}
	}
	err = o.durable("store proposal", func(ctx context.Context) error {
		return c.createProposal(ctx, createParams{proposal: p, now: now, audit: audit})
	}, func(ctx context.Context) (bool, error) {
		_, err := c.store.GetProposal(ctx, p.ID)
		if protocol.IsCode(err, protocol.NotFound) {
			return false, nil
		}
		return err == nil, err
	})
	if store.IsFenced(err) {
		o.lost("store proposal", err)
	}
	if err != nil {
		return c.auditUnavailable("store proposal", err)
	}
	o.frames += 2
	return nil
}

// newProposal is a pending proposal of a prepared command, answering the
// tool call callID of a turn: a new id, idempotency key and expiry.
func (c *Coordinator) newProposal(prep studio.Prepared, convID, requestID, callID string, now time.Time) (store.Proposal, error) {
	id := uuid.NewString()
	hash, err := protocol.ProposalHash(prep.Canonical, id) // bound to this proposal: never the same twice
	if err != nil {
		return store.Proposal{}, err
	}
	return store.Proposal{ID: id, ConversationID: convID, RequestID: requestID, CallID: callID,
		CommandType: prep.Type, Command: prep.Canonical, CommandHash: hash, Target: prep.Target, Risk: prep.Risk,
		Impact: string(prep.Impact), TargetName: prep.TargetName, Summary: prep.Summary, Project: prep.Project,
		IdempotencyKey: uuid.NewString(), ExpiresAt: now.Add(c.cfg.ProposalTTL)}, nil
}

// proposal finds a visible conversation's proposal that the request's
// principal may read (the policy's read_proposal); not_found otherwise.
func (c *Coordinator) proposal(ctx context.Context, convID, proposalID string) (store.Proposal, error) {
	p, err := ofConversation(ctx, c, convID, "proposal", proposalID, c.store.GetProposal, func(p store.Proposal) string { return p.ConversationID })
	if err != nil {
		return p, err
	}
	conv, err := c.store.GetConversation(ctx, p.ConversationID)
	if err != nil {
		return p, err
	}
	if !policy.May(ctx, policy.ReadProposal, policy.ProposalOf(p, conv)) {
		return store.Proposal{}, protocol.Errorf(protocol.NotFound, "proposal %s not found", proposalID)
	}
	return p, nil
}

// ProposalResource is a proposal as policies see it, for a door to decide
// on before it acts: of conversation convID when set (not_found when it is
// another's), of any status, with no visibility applied (the decision
// does).
func (c *Coordinator) ProposalResource(ctx context.Context, convID, proposalID string) (policy.Proposal, error) {
	notFound := protocol.Errorf(protocol.NotFound, "proposal %s not found", proposalID)
	if _, err := uuid.Parse(proposalID); err != nil {
		return policy.Proposal{}, notFound
	}
	p, err := c.store.GetProposal(ctx, proposalID)
	if err != nil {
		return policy.Proposal{}, err
	}
	if convID != "" && p.ConversationID != convID {
		return policy.Proposal{}, notFound
	}
	conv, err := c.store.GetConversation(ctx, p.ConversationID)
	if err != nil {
		return policy.Proposal{}, err
	}
	return policy.ProposalOf(p, conv), nil
}

// PendingProposals are the pending proposals of a request, as policies
// see them: what a cancel of the turn would close.
func (c *Coordinator) PendingProposals(ctx context.Context, convID, requestID string) ([]policy.Proposal, error) {
	if _, err := uuid.Parse(requestID); err != nil {
		return nil, nil
	}
	conv, err := c.store.GetConversation(ctx, convID)
	if err != nil {
		return nil, err
	}
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: requestID,
		Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 100})
	if err != nil {
		return nil, err
	}
	out := make([]policy.Proposal, 0, len(ps))
	for _, p := range ps {
		if p.ConversationID == convID {
			out = append(out, policy.ProposalOf(p, conv))
		}
	}
	return out, nil
}

// GetProposal returns one proposal of a conversation. Reads only read: a
// proposal past its expiry is expired by the sweeper or by a confirm.
func (c *Coordinator) GetProposal(ctx context.Context, convID, proposalID string) (protocol.ProposalState, error) {
	p, err := c.proposal(ctx, convID, proposalID)
	if err != nil {
		return protocol.ProposalState{}, err
	}
	return proposalView(p), nil
}

// FindProposal returns a proposal by id alone (the CLI knows no conversation).
func (c *Coordinator) FindProposal(ctx context.Context, proposalID string) (protocol.ProposalState, error) {
	notFound := protocol.Errorf(protocol.NotFound, "proposal %s not found", proposalID)
	if _, err := uuid.Parse(proposalID); err != nil {
		return protocol.ProposalState{}, notFound
	}
	p, err := c.store.GetProposal(ctx, proposalID)
	if err != nil {
		return protocol.ProposalState{}, err
	}
	conv, err := c.conversation(ctx, p.ConversationID)
	if err != nil || !policy.May(ctx, policy.ReadProposal, policy.ProposalOf(p, conv)) {
		return protocol.ProposalState{}, notFound
	}
	return proposalView(p), nil
}

// ProposalQuery filters proposals: of one conversation when ConversationID
// is set; Status is a comma-separated list of states ("" for all).
type ProposalQuery struct {
	ConversationID string
	Status         string
	// Decidable keeps the pending proposals the request's principal may
	// confirm (the policy's confirm, four-eyes included): what waits for it.
	Decidable bool
}

// ListProposals lists proposals newest first (at most 200).
func (c *Coordinator) ListProposals(ctx context.Context, q ProposalQuery) ([]protocol.ProposalState, error) {
	var statuses []store.ProposalStatus
	if q.Status != "" {
		for _, part := range strings.Split(q.Status, ",") {
			st := store.ProposalStatus(part)
			switch st {
			case store.ProposalPending, store.ProposalExecuting, store.ProposalSucceeded, store.ProposalFailed,
				store.ProposalExpired, store.ProposalCancelled, store.ProposalConflict:
				statuses = append(statuses, st)
			default:
				return nil, protocol.Errorf(protocol.Validation, "unknown proposal status %q", part).With("field", "status")
			}
		}
	}
	if q.ConversationID != "" {
		if _, err := c.conversation(ctx, q.ConversationID); err != nil {
			return nil, err
		}
	}
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{ConversationID: q.ConversationID, Statuses: statuses, Limit: 200,
		VisibleTo: visibleTo(ctx)})
	if err != nil {
		return nil, err
	}
	// The store's filter is coarse: each proposal is the policy's to show
	// (read_proposal), and a deleted conversation's are gone.
	out := make([]protocol.ProposalState, 0, len(ps))
	convs := map[string]*store.Conversation{}
	for _, p := range ps {
		conv, seen := convs[p.ConversationID]
		if !seen {
			if cv, err := c.store.GetConversation(ctx, p.ConversationID); err == nil && cv.Status != store.ConversationDeleted {
				conv = &cv
			}
			convs[p.ConversationID] = conv
		}
		if conv == nil {
			continue
		}
		res := policy.ProposalOf(p, *conv)
		if !policy.May(ctx, policy.ReadProposal, res) ||
			q.Decidable && (p.Status != store.ProposalPending || !policy.May(ctx, policy.Confirm, res)) {
			continue
		}
		out = append(out, proposalView(p))
	}
	return out, nil
}

// proposalView is the wire form of a stored proposal.
func proposalView(p store.Proposal) protocol.ProposalState {
	return protocol.ProposalState{
		CommandProposal: protocol.CommandProposal{ID: p.ID, CommandType: p.CommandType, Command: p.Command, CommandHash: p.CommandHash,
			Risk: p.Risk, Impact: p.Impact, Summary: p.Summary, Target: p.Target, TargetName: p.TargetName,
			IdempotencyKey: p.IdempotencyKey, ExpiresAt: protocol.Timestamp(p.ExpiresAt), Amends: p.AmendedFrom, Origin: p.Origin},
		ConversationID: p.ConversationID, RequestID: p.RequestID, Status: string(p.Status), Result: p.Result, ErrorCode: p.ErrorCode,
		CreatedAt: protocol.Timestamp(p.CreatedAt), ConfirmedAt: stamp(p.ConfirmedAt), CompletedAt: stamp(p.CompletedAt),
		SubmittedBy: p.SubmittedBy, DecidedBy: p.DecidedBy,
	}
}

// storedResult is the answer a proposal's stored state gives (a decision
// about a settled proposal, or one just applied).
func storedResult(p store.Proposal) protocol.ProposalResult {
	r := protocol.ProposalResult{ProposalID: p.ID}
	code := protocol.ErrorCode("")
	if p.ErrorCode != nil {
		code = protocol.ErrorCode(*p.ErrorCode)
	}
	switch p.Status {
	case store.ProposalSucceeded:
		r.Status, r.Result = protocol.ResultSucceeded, p.Result
	case store.ProposalFailed:
		r.Status, r.Error = protocol.ResultFailed, protocol.Errorf(orCode(code, protocol.ServiceFailure), "the command failed")
		if code == notExecuted {
			r.Error = notExecutedError(p.ID)
		}
	case store.ProposalConflict:
		r.Status, r.Error = protocol.ResultConflict, protocol.Errorf(protocol.StaleContext, "the target changed after the proposal was made; nothing was executed")
	case store.ProposalExpired:
		r.Status, r.Error = protocol.ResultExpired, protocol.Errorf(protocol.StaleContext, "the proposal expired unconfirmed; nothing was changed")
	case store.ProposalCancelled:
		r.Status, r.Error = protocol.ResultCancelled, protocol.Errorf(orCode(code, protocol.Denied), "the proposal was declined or its turn ended; nothing was changed")
	default:
		r.Status = protocol.ResultExecuting
	}
	return r
}

func orCode(c, def protocol.ErrorCode) protocol.ErrorCode {
	if c.Valid() {
		return c
	}
	return def
}

// AgentProposedAction is the audit action of a proposal an outside agent
// made: its actor is the agent's principal. The proposal's decision rows
// (docs/design.md §10, their members fixed) have the deciding human as actor.
const AgentProposedAction = "studio.agent.proposed"

// ApprovalRequestedAction is the audit action of a direct command made an
// approval request (direct.go): its actor is the requester; the decision's
// rows have the deciding principal as actor.
const ApprovalRequestedAction = "studio.approval.requested"

// agentProposalAudit is the audit row of a proposal an agent made, or of a
// direct command's approval request, by the turn's submitter; it is
// written in the proposal's own transaction, so no such proposal is
// stored without it.
func agentProposalAudit(p store.Proposal, agent string, a *agentCall, now time.Time) (*store.AppendAdminEventParams, error) {
	d := map[string]any{"conversation_id": p.ConversationID, "request_id": p.RequestID, "proposal_id": p.ID,
		"command_type": p.CommandType, "command_hash": p.CommandHash, "risk": p.Risk}
	action := AgentProposedAction
	if a.Direct {
		action = ApprovalRequestedAction
		d["summary"], d["expires_at"] = p.Summary, protocol.Timestamp(p.ExpiresAt)
	} else {
		d["client"] = a.Client
	}
	details, err := protocol.Marshal(d)
	if err != nil {
		return nil, err
	}
	id := p.ID
	return &store.AppendAdminEventParams{Actor: agent, Action: action, TargetID: &id, Details: details, Now: now}, nil
}
