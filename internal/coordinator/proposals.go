package coordinator

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/tools"
)

// DefaultProposalTTL is how long a proposal waits for a human (ADR D4).
const DefaultProposalTTL = 10 * time.Minute

// ProposalResult statuses beyond the ADR's four: executing (a repeat confirm
// while the command runs) and cancelled (denied, or its turn was cancelled).
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
	ResultConflict  = "conflict"
	ResultExpired   = "expired"
	ResultCancelled = "cancelled"
	ResultExecuting = "executing"
)

// propose turns a command tool's output into a pending proposal (ADR D4 steps
// 1-2): validated command, canonical hash, resolved target, summary, risk from
// the tool's class, a fresh idempotency key and expiry; stored with its
// proposal and confirmation(required) frames. If it cannot be stored, the
// tool answers audit_unavailable and nothing will execute.
func (c *Coordinator) propose(ctx context.Context, t store.Turn, spec tools.Spec, callID string, cmd any) error {
	open, err := c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: t.RequestID,
		Statuses: []store.ProposalStatus{store.ProposalPending, store.ProposalExecuting}, Limit: 1})
	if err != nil {
		return auditUnavailable(c, "read proposals", err)
	}
	if len(open) > 0 {
		return protocol.Errorf(protocol.Conflict, "proposal %s of this turn still awaits the operator; propose one change at a time", open[0].ID).
			With("proposalId", open[0].ID)
	}
	prep, err := c.tools.Prepare(ctx, cmd)
	if err != nil {
		return err
	}
	now := c.now()
	p := store.Proposal{ID: uuid.NewString(), ConversationID: t.ConversationID, RequestID: t.RequestID, CallID: callID,
		CommandType: spec.ID, Command: prep.Canonical, CommandHash: prep.Hash, Target: prep.Target, Risk: string(spec.Class),
		Summary: prep.Summary, IdempotencyKey: uuid.NewString(), ExpiresAt: now.Add(c.cfg.ProposalTTL)}
	if _, err := c.store.CreateProposal(ctx, store.CreateProposalParams{Proposal: p, Now: now}); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return auditUnavailable(c, "store proposal", err)
	}
	return nil
}

func auditUnavailable(c *Coordinator, what string, err error) *protocol.Error {
	c.log.Error(what, "err", err)
	return protocol.Errorf(protocol.AuditUnavailable, "the proposal could not be recorded durably, so nothing will be executed; try again later")
}

// audit builds the ADR D8 admin_events row for one proposal transition.
func audit(p store.Proposal, decision string, result jsontext.Value, code *string, now time.Time) store.AppendAdminEventParams {
	if result == nil {
		result = jsontext.Value(`{}`)
	}
	d := protocol.CommandAudit{ConversationID: p.ConversationID, RequestID: p.RequestID, ProposalID: p.ID,
		CommandType: p.CommandType, CommandHash: p.CommandHash, Target: p.Target, Risk: p.Risk,
		IdempotencyKey: p.IdempotencyKey, Decision: decision, Result: result, ErrorCode: code}
	if p.ConfirmedAt != nil {
		f := protocol.Timestamp(*p.ConfirmedAt)
		d.ConfirmedAt = &f
	}
	if p.CompletedAt != nil {
		f := protocol.Timestamp(*p.CompletedAt)
		d.CompletedAt = &f
	}
	b, err := protocol.Marshal(d)
	if err != nil {
		b = []byte(`{}`)
	}
	id := p.ID
	return store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AuditAction, TargetID: &id, Details: b, Now: now}
}

// inflight is one execution of a confirmed proposal in this process; repeat
// confirms wait for its outcome instead of executing again.
type inflight struct {
	done   chan struct{}
	result protocol.ProposalResult
	err    error
}

// Confirm is ADR D4's confirmation, in order: re-read proposal and target;
// refuse a hash mismatch, a changed target, an expired proposal, an archived
// conversation or a proposal that is not pending; append the confirmed audit
// row and move to executing in one transaction; execute; persist the result
// with its audit row and frames; continue the turn.
func (c *Coordinator) Confirm(ctx context.Context, convID, proposalID string, req protocol.ConfirmProposalRequest) (protocol.ProposalResult, error) {
	conv, p, err := c.proposal(ctx, convID, proposalID)
	if err != nil {
		return protocol.ProposalResult{}, err
	}
	if req.ExpectedCommandHash == "" {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Validation, "expectedCommandHash is required").With("field", "expectedCommandHash")
	}
	p, err = c.expireIfDue(ctx, p)
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
	if p.Status == store.ProposalExecuting {
		return c.awaitExecution(ctx, p)
	}
	if p.Status != store.ProposalPending {
		return c.settled(p), nil
	}
	if conv.Status != store.ConversationActive {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "the conversation is archived; its proposals can no longer be confirmed")
	}

	// One execution per proposal in this process: later callers wait for it.
	c.mu.Lock()
	if f, ok := c.flights[p.ID]; ok {
		c.mu.Unlock()
		return c.await(ctx, f)
	}
	f := &inflight{done: make(chan struct{})}
	c.flights[p.ID] = f
	c.mu.Unlock()
	defer func() {
		close(f.done)
		c.mu.Lock()
		delete(c.flights, p.ID)
		c.mu.Unlock()
	}()
	f.result, f.err = c.confirm(p)
	return f.result, f.err
}

// awaitExecution answers a confirm of an executing proposal: the outcome of
// this process's execution once it is recorded, or, when no execution runs
// here (it finished a moment ago, or the daemon that ran it died), the
// stored state.
func (c *Coordinator) awaitExecution(ctx context.Context, p store.Proposal) (protocol.ProposalResult, error) {
	c.mu.Lock()
	f, ok := c.flights[p.ID]
	c.mu.Unlock()
	if ok {
		return c.await(ctx, f)
	}
	cur, err := c.store.GetProposal(ctx, p.ID)
	if err != nil {
		return protocol.ProposalResult{}, err
	}
	return c.settled(cur), nil
}

func (c *Coordinator) await(ctx context.Context, f *inflight) (protocol.ProposalResult, error) {
	select {
	case <-f.done:
		return f.result, f.err
	case <-ctx.Done():
		return protocol.ProposalResult{}, ctx.Err()
	}
}

func sameVersion(expected *string, target *protocol.ResourceVersion) bool {
	if target == nil {
		return expected == nil || *expected == ""
	}
	return expected != nil && *expected == target.Version
}

// confirm runs a pending proposal to its end. Its context is the daemon's,
// not the request's: a client that goes away does not interrupt it.
func (c *Coordinator) confirm(p store.Proposal) (protocol.ProposalResult, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.base), 10*time.Minute)
	defer cancel()
	// Re-read the target: a change since the proposal means the human
	// confirmed something that no longer exists as shown.
	target, err := c.tools.ResolveTarget(ctx, p.CommandType, p.Command)
	if err != nil && !protocol.IsCode(err, protocol.NotFound) {
		return protocol.ProposalResult{}, err
	}
	if !sameTarget(p.Target, target, err) {
		code := string(protocol.StaleContext)
		perr := protocol.Errorf(protocol.StaleContext, "the target changed after the proposal was made; nothing was executed")
		if target != nil {
			perr = perr.With("currentVersion", target.Version)
		}
		p, err = c.closeProposal(ctx, p, store.ProposalConflict, protocol.DecisionFailed, &code, protocol.ConfirmationFailed, perr)
		if err != nil {
			return protocol.ProposalResult{}, err
		}
		return protocol.ProposalResult{ProposalID: p.ID, Status: ResultConflict, Error: perr}, nil
	}

	now := c.now()
	confirmed := p
	confirmed.ConfirmedAt = &now
	p, err = c.store.ConfirmProposal(ctx, store.ConfirmProposalParams{ID: p.ID, Now: now,
		Audit:  audit(confirmed, protocol.DecisionConfirmed, nil, nil, now),
		Frames: []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: protocol.ConfirmationConfirmed}}}})
	if err != nil {
		if protocol.IsCode(err, protocol.Conflict) { // another process confirmed or closed it
			cur, gerr := c.store.GetProposal(ctx, p.ID)
			if gerr != nil {
				return protocol.ProposalResult{}, gerr
			}
			return c.settled(cur), nil
		}
		return protocol.ProposalResult{}, auditUnavailable(c, "confirm proposal", err)
	}

	result, execErr := c.tools.Execute(ctx, p.CommandType, p.Command, p.Target)
	return c.finishProposal(ctx, p, result, execErr)
}

func sameTarget(proposed, current *protocol.ResourceVersion, err error) bool {
	if proposed == nil {
		return current == nil && err == nil
	}
	return err == nil && current != nil && *current == *proposed
}

// finishProposal persists an executed command's outcome with its audit row,
// its confirmation and tool_result frames, and continues the turn. If that
// cannot be persisted the proposal stays executing, an indeterminate audit
// row is attempted and the idempotency key blocks any second execution.
func (c *Coordinator) finishProposal(ctx context.Context, p store.Proposal, result jsontext.Value, execErr error) (protocol.ProposalResult, error) {
	now := c.now()
	status, state, decision := store.ProposalSucceeded, protocol.ConfirmationExecuted, protocol.DecisionExecuted
	var code *string
	res := protocol.ToolResultPayload{CallID: p.CallID, OK: true}
	out := protocol.ProposalResult{ProposalID: p.ID, Status: ResultSucceeded}
	if execErr != nil {
		pe := toolError(c, execErr)
		s := string(pe.Code)
		status, state, decision, code = store.ProposalFailed, protocol.ConfirmationFailed, protocol.DecisionFailed, &s
		res.OK, res.Error = false, pe
		out.Status, out.Error = ResultFailed, pe
		result = nil
	} else {
		result = boundResult(redact(result))
		res.Result, _ = protocol.Marshal(map[string]any{"proposalId": p.ID, "status": ResultSucceeded, "result": result})
		out.Result = result
	}
	done := p
	done.CompletedAt = &now
	p2, resumed, err := c.store.FinishProposal(ctx, store.FinishProposalParams{ID: p.ID, Status: status, Result: result, ErrorCode: code, Now: now,
		Audit:  audit(done, decision, result, code, now),
		Frames: []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: state}}, {Payload: res}}})
	if err != nil {
		c.log.Error("persist proposal result", "proposal", p.ID, "err", err)
		if _, aerr := c.store.AppendAdminEvent(ctx, audit(done, protocol.DecisionIndeterminate, result, code, now)); aerr != nil {
			c.log.Error("append indeterminate audit row", "proposal", p.ID, "err", aerr)
		}
		pe := protocol.Errorf(protocol.AuditUnavailable,
			"the command ran but its result could not be recorded; the proposal stays executing and will not run again until reconciled")
		c.endTurn(store.Turn{RequestID: p.RequestID, ConversationID: p.ConversationID}, store.TurnFailed, pe)
		return protocol.ProposalResult{ProposalID: p.ID, Status: ResultExecuting, Error: pe}, nil
	}
	if resumed {
		c.continueTurn(p2.RequestID, p2.ConversationID)
	}
	return out, nil
}

// Deny refuses a pending proposal: cancelled, audited as denied, and the
// model continues knowing the operator declined.
func (c *Coordinator) Deny(ctx context.Context, convID, proposalID string) (protocol.ProposalResult, error) {
	_, p, err := c.proposal(ctx, convID, proposalID)
	if err != nil {
		return protocol.ProposalResult{}, err
	}
	if p, err = c.expireIfDue(ctx, p); err != nil {
		return protocol.ProposalResult{}, err
	}
	switch p.Status {
	case store.ProposalPending:
	case store.ProposalCancelled:
		return c.settled(p), nil
	default:
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "proposal %s is %s; only a pending proposal can be denied", p.ID, p.Status).
			With("status", string(p.Status))
	}
	perr := protocol.Errorf(protocol.Denied, "the operator declined this proposal; nothing was changed")
	p, err = c.closeProposal(ctx, p, store.ProposalCancelled, protocol.DecisionDenied, nil, protocol.ConfirmationDenied, perr)
	if err != nil {
		return protocol.ProposalResult{}, err
	}
	return c.settled(p), nil
}

// closeProposal ends a pending proposal without executing it, with its audit
// row, a confirmation frame and the tool_result the model sees, and
// continues the turn if it was waiting.
func (c *Coordinator) closeProposal(ctx context.Context, p store.Proposal, status store.ProposalStatus, decision string,
	code *string, state string, perr *protocol.Error) (store.Proposal, error) {
	p2, resumed, err := c.closeOnly(ctx, p, status, decision, code, state, perr)
	if resumed {
		c.continueTurn(p2.RequestID, p2.ConversationID)
	}
	return p2, err
}

// closeOnly is closeProposal without continuing the turn: for a turn that
// is ending anyway.
func (c *Coordinator) closeOnly(ctx context.Context, p store.Proposal, status store.ProposalStatus, decision string,
	code *string, state string, perr *protocol.Error) (store.Proposal, bool, error) {
	now := c.now()
	closed := p
	closed.CompletedAt = &now
	if code == nil {
		s := string(perr.Code)
		code = &s
	}
	p2, resumed, err := c.store.CloseProposal(ctx, store.CloseProposalParams{ID: p.ID, Status: status, ErrorCode: code, Now: now,
		Audit: audit(closed, decision, nil, code, now),
		Frames: []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: state}},
			{Payload: protocol.ToolResultPayload{CallID: p.CallID, OK: false, Error: perr}}}})
	if err != nil {
		if protocol.IsCode(err, protocol.Conflict) {
			cur, gerr := c.store.GetProposal(ctx, p.ID)
			return cur, false, gerr
		}
		return p, false, auditUnavailable(c, "close proposal", err)
	}
	return p2, resumed, nil
}

// expireIfDue expires a pending proposal past its expiry (on any read).
func (c *Coordinator) expireIfDue(ctx context.Context, p store.Proposal) (store.Proposal, error) {
	if p.Status != store.ProposalPending || c.now().Before(p.ExpiresAt) {
		return p, nil
	}
	perr := protocol.Errorf(protocol.StaleContext, "the proposal expired unconfirmed; nothing was changed")
	return c.closeProposal(ctx, p, store.ProposalExpired, protocol.DecisionExpired, nil, protocol.ConfirmationExpired, perr)
}

// ExpireDue expires every pending proposal past its expiry; the sweeper
// calls it, and tests call it with a fake clock.
func (c *Coordinator) ExpireDue(ctx context.Context) (int, error) {
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 1000})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range ps {
		if c.now().Before(p.ExpiresAt) {
			continue
		}
		if _, err := c.expireIfDue(ctx, p); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// settled answers a proposal that is not pending with its stored state.
func (c *Coordinator) settled(p store.Proposal) protocol.ProposalResult {
	r := protocol.ProposalResult{ProposalID: p.ID}
	code := protocol.ErrorCode("")
	if p.ErrorCode != nil {
		code = protocol.ErrorCode(*p.ErrorCode)
	}
	switch p.Status {
	case store.ProposalSucceeded:
		r.Status, r.Result = ResultSucceeded, p.Result
	case store.ProposalFailed:
		r.Status, r.Error = ResultFailed, protocol.Errorf(orCode(code, protocol.ServiceFailure), "the command failed")
	case store.ProposalConflict:
		r.Status, r.Error = ResultConflict, protocol.Errorf(protocol.StaleContext, "the target changed after the proposal was made; nothing was executed")
	case store.ProposalExpired:
		r.Status, r.Error = ResultExpired, protocol.Errorf(protocol.StaleContext, "the proposal expired unconfirmed; nothing was changed")
	case store.ProposalCancelled:
		r.Status, r.Error = ResultCancelled, protocol.Errorf(orCode(code, protocol.Denied), "the proposal was declined or its turn cancelled; nothing was changed")
	default:
		r.Status = ResultExecuting
	}
	return r
}

func orCode(c, def protocol.ErrorCode) protocol.ErrorCode {
	if c.Valid() {
		return c
	}
	return def
}

// proposal finds a visible conversation's proposal.
func (c *Coordinator) proposal(ctx context.Context, convID, proposalID string) (store.Conversation, store.Proposal, error) {
	conv, err := c.conversation(ctx, convID)
	if err != nil {
		return conv, store.Proposal{}, err
	}
	notFound := protocol.Errorf(protocol.NotFound, "proposal %s not found", proposalID)
	if _, err := uuid.Parse(proposalID); err != nil {
		return conv, store.Proposal{}, notFound
	}
	p, err := c.store.GetProposal(ctx, proposalID)
	if err != nil {
		return conv, p, err
	}
	if p.ConversationID != convID {
		return conv, store.Proposal{}, notFound
	}
	return conv, p, nil
}

// GetProposal returns one proposal (expiring it first if due).
func (c *Coordinator) GetProposal(ctx context.Context, convID, proposalID string) (store.Proposal, error) {
	_, p, err := c.proposal(ctx, convID, proposalID)
	if err != nil {
		return p, err
	}
	return c.expireIfDue(ctx, p)
}

// FindProposal returns a proposal by id alone (the CLI knows no conversation).
func (c *Coordinator) FindProposal(ctx context.Context, proposalID string) (store.Proposal, error) {
	if _, err := uuid.Parse(proposalID); err != nil {
		return store.Proposal{}, protocol.Errorf(protocol.NotFound, "proposal %s not found", proposalID)
	}
	p, err := c.store.GetProposal(ctx, proposalID)
	if err != nil {
		return p, err
	}
	if _, err := c.conversation(ctx, p.ConversationID); err != nil {
		return store.Proposal{}, protocol.Errorf(protocol.NotFound, "proposal %s not found", proposalID)
	}
	return c.expireIfDue(ctx, p)
}

// ListProposals lists proposals (of one conversation when convID is set),
// expiring due ones first.
func (c *Coordinator) ListProposals(ctx context.Context, convID string, statuses []store.ProposalStatus) ([]store.Proposal, error) {
	if convID != "" {
		if _, err := c.conversation(ctx, convID); err != nil {
			return nil, err
		}
	}
	if _, err := c.ExpireDue(ctx); err != nil {
		return nil, err
	}
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{ConversationID: convID, Statuses: statuses, Limit: 200})
	if err != nil {
		return nil, err
	}
	out := ps[:0]
	for _, p := range ps {
		if convID == "" {
			if conv, err := c.store.GetConversation(ctx, p.ConversationID); err != nil || conv.Status == store.ConversationDeleted {
				continue
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// ProposalView is the wire form of a stored proposal.
func ProposalView(p store.Proposal) protocol.ProposalState {
	v := protocol.ProposalState{
		CommandProposal: protocol.CommandProposal{ID: p.ID, CommandType: p.CommandType, Command: p.Command, CommandHash: p.CommandHash,
			Risk: p.Risk, Summary: p.Summary, Target: p.Target, IdempotencyKey: p.IdempotencyKey, ExpiresAt: protocol.Timestamp(p.ExpiresAt)},
		ConversationID: p.ConversationID, RequestID: p.RequestID, Status: string(p.Status), Result: p.Result, ErrorCode: p.ErrorCode,
		CreatedAt: protocol.Timestamp(p.CreatedAt),
	}
	if p.ConfirmedAt != nil {
		f := protocol.Timestamp(*p.ConfirmedAt)
		v.ConfirmedAt = &f
	}
	if p.CompletedAt != nil {
		f := protocol.Timestamp(*p.CompletedAt)
		v.CompletedAt = &f
	}
	return v
}

// closeTurnProposals cancels the pending proposals of a turn that is ending
// (audited as denied); executing ones are left to finish.
func (c *Coordinator) closeTurnProposals(ctx context.Context, requestID string) {
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: requestID, Statuses: []store.ProposalStatus{store.ProposalPending}})
	if err != nil {
		c.log.Error("list proposals of ending turn", "request", requestID, "err", err)
		return
	}
	for _, p := range ps {
		perr := protocol.Errorf(protocol.Cancelled, "the turn was cancelled before the operator decided; nothing was changed")
		if _, _, err := c.closeOnly(ctx, p, store.ProposalCancelled, protocol.DecisionDenied, nil, protocol.ConfirmationDenied, perr); err != nil {
			c.log.Error("cancel proposal of ending turn", "proposal", p.ID, "err", err)
		}
	}
}
