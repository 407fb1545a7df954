package coordinator

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// Decisions about proposals, from outside the turn (the API's side):
// Confirm and Deny check the request, then deliver it to the owner of the
// proposal's turn through its mailbox and wait for the answer; the owner
// applies it (parked.go). A proposal that is no longer pending is
// answered from the store. SettleProposal records a reconciled outcome.

// Confirm is the confirmation of docs/design.md §9.3: the request is checked
// here (hash, and the target version when given — omitted means the version
// the proposal was made for), then the turn's owner re-reads the proposal and
// its target, refuses an expired proposal, a changed target or an archived
// conversation, appends the confirmed audit row and moves the proposal to
// executing in one transaction, executes the command, records its result with
// its audit row and frames, and continues the turn. A proposal that is no
// longer pending answers its stored outcome.
func (c *Coordinator) Confirm(ctx context.Context, convID, proposalID string, req protocol.ConfirmProposalRequest) (protocol.ProposalResult, error) {
	if req.ExpectedCommandHash == "" {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Validation, "expectedCommandHash is required").With("field", "expectedCommandHash")
	}
	if pe := c.leaseErr(); pe != nil {
		return protocol.ProposalResult{}, pe
	}
	p, err := c.readProposal(ctx, convID, proposalID)
	if err != nil {
		return protocol.ProposalResult{}, err
	}
	if req.ExpectedCommandHash != p.CommandHash {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "the command hash does not match the proposal; refresh it").
			With("proposalId", p.ID)
	}
	if !sameVersion(req.ExpectedTargetVersion, p.Target) {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.StaleContext, "the expected target version does not match the proposal; refresh it").
			With("proposalId", p.ID)
	}
	return c.deliverDecision(ctx, p, decideConfirm)
}

// sameVersion checks the client's expected target version against the
// proposal's; an omitted one is the proposal's own (optional:
// docs/design.md §9.3, step 3).
func sameVersion(expected *string, target *protocol.ResourceVersion) bool {
	if expected == nil {
		return true
	}
	if target == nil {
		return *expected == ""
	}
	return *expected == target.Version
}

// Deny refuses a pending proposal: cancelled, audited as denied, and the
// model continues knowing the operator declined. Denying a proposal that
// is no longer pending is conflict (details.status says what it is),
// except a repeat of a deny.
func (c *Coordinator) Deny(ctx context.Context, convID, proposalID string) (protocol.ProposalResult, error) {
	if pe := c.leaseErr(); pe != nil {
		return protocol.ProposalResult{}, pe
	}
	p, err := c.readProposal(ctx, convID, proposalID)
	if err != nil {
		return protocol.ProposalResult{}, err
	}
	return c.deliverDecision(ctx, p, decideDeny)
}

// readProposal is c.proposal within one call's deadline: a decision on a
// daemon whose database connections hang is answered, not left waiting.
func (c *Coordinator) readProposal(ctx context.Context, convID, proposalID string) (store.Proposal, error) {
	rctx, cancel := c.call(ctx)
	defer cancel()
	p, err := c.proposal(rctx, convID, proposalID)
	if err != nil && store.Transient(err) {
		return p, c.unanswered("read the proposal", err)
	}
	return p, err
}

// unanswered is the error of a decision whose reads the database did not
// answer in time: nothing was decided.
func (c *Coordinator) unanswered(what string, err error) *protocol.Error {
	c.log.Warn(what+": the database did not answer", "err", err)
	return &protocol.Error{Code: protocol.ServiceFailure, Retryable: true, RetryAfterMs: leaseRetryAfter.Milliseconds(),
		Message: "the database did not answer this daemon in time; nothing was decided: try again, or on another daemon"}
}

// deliverDecision hands a decision to the owner of the proposal's turn
// and waits for its answer (the owner's applyDecision, parked.go). A
// proposal that is no longer pending is answered from the store: that is a
// read, which changes nothing.
func (c *Coordinator) deliverDecision(ctx context.Context, p store.Proposal, kind decisionKind) (protocol.ProposalResult, error) {
	sctx, cancel := c.call(ctx)
	reply, err := c.sendDecision(sctx, p, kind)
	cancel()
	if err != nil || reply == nil {
		// p was read before sendDecision looked for an owner: a decision that won
		// the race meanwhile (and an owner that finished the turn since)
		// is in the store, not in p. Answer from what is stored now.
		rctx, cancel := c.call(ctx)
		cur, gerr := c.store.GetProposal(rctx, p.ID)
		cancel()
		if gerr == nil {
			p = cur
		}
		if err != nil && (gerr != nil || p.Status == store.ProposalPending) {
			// Not decided: say why, not that it is pending.
			if store.Transient(err) {
				err = c.unanswered("deliver a decision", err)
			}
			return protocol.ProposalResult{}, err
		}
		if kind == decideConfirm && p.Status == store.ProposalExecuting && p.Owner != "" {
			// Another daemon executes it: a repeat waits for the outcome,
			// as it does where the command runs.
			p = c.awaitOutcome(ctx, p)
		}
		return notPendingAnswer(kind, p)
	}
	select {
	case r := <-reply:
		if kind == decideConfirm && r.err == nil && r.result.Status == protocol.ResultExecuting && r.result.Error == nil {
			// A concurrent confirm that lost to another daemon's owner,
			// which executes it: wait for the outcome there.
			if cur, err := c.store.GetProposal(ctx, p.ID); err == nil && cur.Owner != "" && cur.Owner != c.cfg.Instance {
				return notPendingAnswer(kind, c.awaitOutcome(ctx, cur))
			}
		}
		return r.result, r.err
	case <-ctx.Done():
		return protocol.ProposalResult{}, ctx.Err()
	}
}

// sendDecision puts a decision in the mailbox of the proposal's turn's
// owner. It returns a nil channel when the proposal is settled already
// (answer from p), after closing a proposal whose turn ended without it
// (an orphan).
func (c *Coordinator) sendDecision(ctx context.Context, p store.Proposal, kind decisionKind) (chan decisionReply, error) {
	return c.sendDecisionRequest(ctx, p, decisionRequest{kind: kind, proposalID: p.ID})
}

// sendDecisionRequest is sendDecision for a request that carries more
// than its kind (an amendment's command).
func (c *Coordinator) sendDecisionRequest(ctx context.Context, p store.Proposal, r decisionRequest) (chan decisionReply, error) {
	r.reply = make(chan decisionReply, 1)
	r.by = principalName(ctx)
	if p.Status == store.ProposalExecuting {
		// Executing here: a repeat waits for the outcome (it never
		// executes twice). Elsewhere, or indeterminate: its stored state.
		c.mu.Lock()
		o := c.owners[p.RequestID]
		c.mu.Unlock()
		if o == nil {
			return nil, nil
		}
		o.box.put(r)
		return r.reply, nil
	}
	if p.Status != store.ProposalPending {
		return nil, nil
	}
	t, err := c.store.GetTurn(ctx, p.RequestID)
	if err != nil {
		return nil, err
	}
	o, err := c.ownerFor(t)
	if err != nil {
		return nil, err
	}
	if o == nil {
		if t.Status.Terminal() {
			_, _, err := c.cancelOrphan(ctx, orphanParams{proposal: p})
			return nil, err
		}
		return nil, nil
	}
	o.box.put(r)
	return r.reply, nil
}

// awaitOutcome waits, up to RemoteDecisionWait, for a proposal that
// another daemon executes to leave executing (its outcome's frames wake
// this daemon's streams, across daemons), and returns it as it then is.
// An executing proposal with no owner is indeterminate: returned at once.
func (c *Coordinator) awaitOutcome(ctx context.Context, p store.Proposal) store.Proposal {
	wait := time.NewTimer(c.cfg.RemoteDecisionWait)
	defer wait.Stop()
	for p.Status == store.ProposalExecuting && p.Owner != "" {
		sig := c.store.FrameSignal(p.ConversationID) // before the read: no commit is missed
		cur, err := c.store.GetProposal(ctx, p.ID)
		if err != nil {
			return p
		}
		if p = cur; p.Status != store.ProposalExecuting || p.Owner == "" {
			return p
		}
		select {
		case <-sig:
		case <-time.After(time.Second): // a takeover writes no frame of the proposal
		case <-wait.C:
			return p
		case <-ctx.Done():
			return p
		}
	}
	return p
}

// SettleProposal records the real outcome of a proposal left executing
// (indeterminate), for reconcile_proposal: through finishProposal, the
// code a confirmed execution finishes with, with the application's own
// audit row in the same transaction. Nothing executes.
func (c *Coordinator) SettleProposal(ctx context.Context, s studio.Settlement) error {
	p, err := c.store.GetProposal(ctx, s.ProposalID)
	if err != nil {
		return err
	}
	if p.Status != store.ProposalExecuting {
		return protocol.Errorf(protocol.Conflict, "proposal %s is %s, not indeterminate; there is nothing to reconcile", p.ID, p.Status).
			With("status", string(p.Status))
	}
	fp := finishParams{proposal: p, result: s.Result, actor: s.Actor, also: &s.Also}
	if !s.Succeeded {
		code := "reconciled_failed"
		fp.code = &code
		fp.failure = protocol.Errorf(protocol.ServiceFailure, "reconciled as failed")
	}
	_, err = c.finishProposal(ctx, fp)
	return err
}
