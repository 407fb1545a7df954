package coordinator

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The store transitions of proposals, and the turn's end (endTurn), one
// function each, each taking its params and making one store transaction
// with its audit rows and frames. They read no owner state and call no owner: the owner
// (parked.go, confirm.go, ending.go), the sweeper and the reaper call them.

func (c *Coordinator) auditUnavailable(what string, err error) *protocol.Error {
	c.log.Error(what, "err", err)
	return protocol.Errorf(protocol.AuditUnavailable, "the proposal could not be recorded durably, so nothing will be executed; try again later")
}

// closeParams is how a pending proposal ends without executing.
type closeParams struct {
	status   store.ProposalStatus // cancelled, expired or conflict
	decision protocol.Decision
	state    protocol.ConfirmationState
	err      *protocol.Error // the tool_result the model sees
	code     *string         // the stored error code (default err.Code)
	frames   bool            // false for a turn that ended already (an orphan)
	by       string          // the denying principal ("" for none: the audit's actor is studio_operator)
}

// closeProposal ends a pending proposal without executing it: its audit
// row, and (frames) its confirmation frame and the tool_result the model
// sees, in one transaction. resumed says the turn was waiting for it and
// is running again.
func (c *Coordinator) closeProposal(ctx context.Context, p store.Proposal, cp closeParams) (store.Proposal, bool, error) {
	now := c.now()
	closed := p
	closed.CompletedAt = &now
	code := cp.code
	if code == nil {
		s := string(cp.err.Code)
		code = &s
	}
	params := store.CloseProposalParams{ID: p.ID, Status: cp.status, ErrorCode: code, Now: now, Instance: c.cfg.Instance, DecidedBy: cp.by,
		Audit: auditRow(closed, auditParams{decision: cp.decision, code: code, actor: cp.by, now: now})}
	if cp.frames {
		params.Frames = []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: cp.state, DecidedBy: cp.by}},
			{Payload: protocol.ToolResultPayload{CallID: p.CallID, OK: false, Error: amendedError(p, cp.err)}}}
	}
	out, resumed, err := c.store.CloseProposal(ctx, params)
	if err != nil {
		if protocol.IsCode(err, protocol.Conflict) {
			return out, false, err
		}
		return p, false, c.auditUnavailable("close proposal", err)
	}
	c.obs.ProposalDecided(decidedOf(p, cp.decision))
	return out, resumed, nil
}

// denyProposal: the operator declined.
func (c *Coordinator) denyProposal(ctx context.Context, p store.Proposal, by string) (store.Proposal, bool, error) {
	return c.closeProposal(ctx, p, closeParams{status: store.ProposalCancelled, decision: protocol.DecisionDenied,
		state: protocol.ConfirmationDenied, frames: true, by: by,
		err: protocol.Errorf(protocol.Denied, "the operator declined this proposal; nothing was changed")})
}

// expireProposal: nobody decided within its time.
func (c *Coordinator) expireProposal(ctx context.Context, p store.Proposal) (store.Proposal, bool, error) {
	return c.closeProposal(ctx, p, closeParams{status: store.ProposalExpired, decision: protocol.DecisionExpired,
		state: protocol.ConfirmationExpired, frames: true,
		err: protocol.Errorf(protocol.StaleContext, "the proposal expired unconfirmed; nothing was changed")})
}

// refuseStale: the target changed after the proposal was made.
func (c *Coordinator) refuseStale(ctx context.Context, p store.Proposal, current *protocol.ResourceVersion) (store.Proposal, bool, error) {
	perr := protocol.Errorf(protocol.StaleContext, "the target changed after the proposal was made; nothing was executed")
	if current != nil {
		perr = perr.With("currentVersion", current.Version)
	}
	return c.closeProposal(ctx, p, closeParams{status: store.ProposalConflict, decision: protocol.DecisionFailed,
		state: protocol.ConfirmationFailed, frames: true, err: perr})
}

// cancelWithTurn: its turn is ending before anyone decided.
func (c *Coordinator) cancelWithTurn(ctx context.Context, p store.Proposal, status store.TurnStatus) error {
	perr := protocol.Errorf(protocol.Cancelled, "the turn was cancelled before the operator decided; nothing was changed")
	if status != store.TurnCancelled {
		perr = protocol.Errorf(protocol.Cancelled, "the turn ended before the operator decided; nothing was changed")
	}
	_, _, err := c.closeProposal(ctx, p, closeParams{status: store.ProposalCancelled, decision: protocol.DecisionDenied,
		state: protocol.ConfirmationDenied, frames: true, err: perr})
	if protocol.IsCode(err, protocol.Conflict) && !store.IsFenced(err) {
		return nil // decided meanwhile (by another daemon)
	}
	return err
}

// cancelOrphan: its turn ended without it (a daemon that died between
// storing the proposal and parking its turn). No frames: the turn is over.
func (c *Coordinator) cancelOrphan(ctx context.Context, p store.Proposal) (store.Proposal, bool, error) {
	code := string(protocol.ServiceRestarted)
	out, resumed, err := c.closeProposal(ctx, p, closeParams{status: store.ProposalCancelled, decision: protocol.DecisionDenied,
		code: &code, err: protocol.Errorf(protocol.ServiceRestarted, "its turn ended before the proposal was decided")})
	if err == nil {
		c.log.Warn("cancelled a proposal whose turn had ended", "proposal", p.ID)
	}
	if protocol.IsCode(err, protocol.Conflict) {
		return out, resumed, nil
	}
	return out, resumed, err
}

// confirmProposal: pending to executing with the confirmed audit row and
// frame, before anything executes (ADR D4 step 5, D8).
func (c *Coordinator) confirmProposal(ctx context.Context, p store.Proposal, by string) (store.Proposal, error) {
	now := c.now()
	confirmed := p
	confirmed.ConfirmedAt = &now
	if c.cfg.Shared {
		// This daemon takes the command: its instance must be live, and
		// stay so until the confirmation commits.
		ctx = store.WithFence(ctx, store.Fence{Instance: c.cfg.Instance, Hold: true})
	}
	out, err := c.store.ConfirmProposal(ctx, store.ConfirmProposalParams{ID: p.ID, Now: now, Instance: c.cfg.Instance, DecidedBy: by,
		Audit:  auditRow(confirmed, auditParams{decision: protocol.DecisionConfirmed, actor: by, now: now}),
		Frames: []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: protocol.ConfirmationConfirmed, DecidedBy: by}}}})
	if err == nil {
		c.obs.ProposalDecided(decidedOf(p, protocol.DecisionConfirmed))
	}
	return out, err
}

// finishParams records an executed proposal's outcome.
type finishParams struct {
	proposal store.Proposal
	result   jsontext.Value  // what the command returned (ignored when it failed)
	failure  *protocol.Error // why the command failed
	code     *string         // the stored error code (default failure.Code)
	actor    string          // the audit row's actor: the deciding principal (default studio_operator)
	also     *store.AppendAdminEventParams
	frames   bool // the turn is active: confirmation and tool_result frames
}

// finished is what finishProposal recorded.
type finished struct {
	proposal store.Proposal
	resumed  bool
	result   protocol.ProposalResult
}

// finishProposal: executing to succeeded or failed, with the executed or
// failed audit row and (frames) the confirmation and tool_result frames, in
// one transaction. A confirmed execution and reconcile_proposal both finish
// here.
func (c *Coordinator) finishProposal(ctx context.Context, fp finishParams) (finished, error) {
	p, now := fp.proposal, c.now()
	status, state, decision := store.ProposalSucceeded, protocol.ConfirmationExecuted, protocol.DecisionExecuted
	result, code := fp.result, fp.code
	tool := protocol.ToolResultPayload{CallID: p.CallID, OK: true}
	out := protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultSucceeded}
	if fp.failure != nil {
		status, state, decision = store.ProposalFailed, protocol.ConfirmationFailed, protocol.DecisionFailed
		if code == nil {
			s := string(fp.failure.Code)
			code = &s
		}
		tool.OK, tool.Error = false, amendedError(p, fp.failure)
		out.Status, out.Error = protocol.ResultFailed, fp.failure
	} else {
		b, err := protocol.Marshal(amendedNote(p, map[string]any{"proposalId": p.ID, "status": protocol.ResultSucceeded, "result": result}))
		if err != nil {
			return finished{}, err
		}
		tool.Result, out.Result = b, result
	}
	done := p
	done.CompletedAt = &now
	params := store.FinishProposalParams{ID: p.ID, Status: status, Result: result, ErrorCode: code, Now: now, Also: fp.also, Instance: c.cfg.Instance,
		Audit: auditRow(done, auditParams{decision: decision, result: result, code: code, actor: fp.actor, now: now})}
	if fp.frames {
		params.Frames = []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: state}}, {Payload: tool}}
	}
	stored, resumed, err := c.store.FinishProposal(ctx, params)
	if err != nil {
		return finished{}, err
	}
	c.obs.ProposalDecided(decidedOf(p, decision))
	return finished{proposal: stored, resumed: resumed, result: out}, nil
}

// indeterminate is a proposal whose execution's result could not be
// recorded: it stays executing, and its indeterminate audit row is
// written (retried with the turn's end when the first try fails).
type indeterminate struct {
	proposal store.Proposal
	result   jsontext.Value
	failure  *protocol.Error
}

// markIndeterminate appends the indeterminate audit row, once.
func (c *Coordinator) markIndeterminate(ctx context.Context, in indeterminate) error {
	rows, err := c.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: protocol.AuditAction, TargetID: in.proposal.ID, Limit: 50})
	if err != nil {
		return err
	}
	for _, r := range rows {
		var d protocol.CommandAudit
		if protocol.Unmarshal(r.Details, &d) == nil && d.Decision == protocol.DecisionIndeterminate {
			return nil
		}
	}
	now := c.now()
	var code *string
	if in.failure != nil {
		s := string(in.failure.Code)
		code = &s
	}
	done := in.proposal
	done.CompletedAt = &now
	if _, err := c.store.AppendAdminEvent(ctx, auditRow(done, auditParams{decision: protocol.DecisionIndeterminate,
		result: in.result, code: code, now: now})); err != nil {
		return err
	}
	c.obs.ProposalDecided(decidedOf(in.proposal, protocol.DecisionIndeterminate))
	c.log.Warn("proposal outcome is indeterminate; reconcile it", "proposal", in.proposal.ID, "command", in.proposal.CommandType)
	return nil
}

// auditParams is one audit row's decision and outcome.
type auditParams struct {
	decision protocol.Decision
	result   jsontext.Value
	code     *string
	actor    string // default studio_operator
	now      time.Time
}

// auditRow builds the ADR D8 admin_events row for one proposal transition.
func auditRow(p store.Proposal, ap auditParams) store.AppendAdminEventParams {
	result := ap.result
	if result == nil {
		result = jsontext.Value(`{}`)
	}
	d := protocol.CommandAudit{ConversationID: p.ConversationID, RequestID: p.RequestID, ProposalID: p.ID,
		CommandType: p.CommandType, CommandHash: p.CommandHash, Target: p.Target, Risk: p.Risk,
		IdempotencyKey: p.IdempotencyKey, Decision: ap.decision, Result: result, ErrorCode: ap.code,
		ConfirmedAt: stamp(p.ConfirmedAt), CompletedAt: stamp(p.CompletedAt)}
	b, err := protocol.Marshal(d)
	if err != nil {
		b = []byte(`{}`)
	}
	actor := ap.actor
	if actor == "" {
		actor = protocol.AuditActor
	}
	id := p.ID
	return store.AppendAdminEventParams{Actor: actor, Action: protocol.AuditAction, TargetID: &id, Details: b, Now: ap.now}
}

// endParams is how a turn ends.
type endParams struct {
	turn          store.Turn
	status        store.TurnStatus // terminal
	err           *protocol.Error  // the error frame before done, if any
	indeterminate *indeterminate   // an indeterminate audit row still owed
}

// endTurn is the turn's terminal transition: open proposals closed, then
// error and done frames with the status. A turn that already ended (by
// another daemon's recovery, say) is not an error.
func (c *Coordinator) endTurn(ctx context.Context, p endParams) error {
	if p.indeterminate != nil {
		if err := c.markIndeterminate(ctx, *p.indeterminate); err != nil {
			return err
		}
	}
	open, err := c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: p.turn.RequestID,
		Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 100})
	if err != nil {
		return err
	}
	for _, prop := range open {
		if err := c.cancelWithTurn(ctx, prop, p.status); err != nil {
			return err
		}
	}
	_, _, err = c.store.FinishTurn(ctx, store.FinishTurnParams{RequestID: p.turn.RequestID, Status: p.status, Error: p.err, Now: c.now(),
		Instance: c.cfg.Instance})
	if protocol.IsCode(err, protocol.Conflict) && !store.IsFenced(err) {
		return nil
	}
	return err
}
