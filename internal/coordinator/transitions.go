package coordinator

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The store transitions of proposals, and the turn's end (endTurn), one
// function each, each taking its params struct and making one store
// transaction with its audit rows and frames:
//
//	createProposal    (none)    → pending
//	denyProposal      pending   → cancelled (denied)
//	expireProposal    pending   → expired
//	refuseStale       pending   → conflict (the target changed)
//	cancelWithTurn    pending   → cancelled (its turn ended first)
//	cancelOrphan      pending   → cancelled (its turn ended without it)
//	amendProposal     pending   → cancelled (amended), and a new pending one
//	confirmProposal   pending   → executing
//	finishProposal    executing → succeeded | failed
//	markIndeterminate executing, audited indeterminate (reconcile settles it)
//	endTurn           the turn  → completed | failed | cancelled
//
// They read no owner state and call no owner: the owner (parked.go,
// confirm.go, amend.go, ending.go), the sweeper and the reaper call them.

// auditUnavailable logs a failed write of a proposal's transition and is
// the error its caller answers: nothing executes without its audit row.
func (c *Coordinator) auditUnavailable(what string, err error) *protocol.Error {
	c.log.Error(what, "err", err)
	return protocol.Errorf(protocol.AuditUnavailable, "the proposal could not be recorded durably, so nothing will be executed; try again later")
}

// createParams is a new pending proposal (newProposal) and when it was
// made.
type createParams struct {
	proposal store.Proposal
	now      time.Time
	audit    *store.AppendAdminEventParams // an agent's proposal: its audit row, in the same write
}

// createProposal: a new pending proposal, with its proposal and
// confirmation(required) frames (docs/design.md §9.3, step 2).
func (c *Coordinator) createProposal(ctx context.Context, cp createParams) error {
	_, err := c.store.CreateProposal(ctx, store.CreateProposalParams{Proposal: cp.proposal, Now: cp.now, Audit: cp.audit})
	return err
}

// closeParams is how a pending proposal ends without executing.
type closeParams struct {
	proposal store.Proposal
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
func (c *Coordinator) closeProposal(ctx context.Context, cp closeParams) (store.Proposal, bool, error) {
	p, now := cp.proposal, c.now()
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

// denyParams is a deny: the proposal and the denying principal's name.
type denyParams struct {
	proposal store.Proposal
	by       string // "" for none: the audit's actor is studio_operator
}

// denyProposal: the operator declined.
func (c *Coordinator) denyProposal(ctx context.Context, dp denyParams) (store.Proposal, bool, error) {
	return c.closeProposal(ctx, closeParams{proposal: dp.proposal, status: store.ProposalCancelled, decision: protocol.DecisionDenied,
		state: protocol.ConfirmationDenied, frames: true, by: dp.by,
		err: protocol.Errorf(protocol.Denied, "the operator declined this proposal; nothing was changed")})
}

// expireParams is an expiry: the proposal past its expiresAt.
type expireParams struct{ proposal store.Proposal }

// expireProposal: nobody decided within its time.
func (c *Coordinator) expireProposal(ctx context.Context, ep expireParams) (store.Proposal, bool, error) {
	return c.closeProposal(ctx, closeParams{proposal: ep.proposal, status: store.ProposalExpired, decision: protocol.DecisionExpired,
		state: protocol.ConfirmationExpired, frames: true,
		err: protocol.Errorf(protocol.StaleContext, "the proposal expired unconfirmed; nothing was changed")})
}

// staleParams is a confirm refused: the proposal and its target's current
// version (nil when the target is gone).
type staleParams struct {
	proposal store.Proposal
	current  *protocol.ResourceVersion
}

// refuseStale: the target changed after the proposal was made.
func (c *Coordinator) refuseStale(ctx context.Context, sp staleParams) (store.Proposal, bool, error) {
	perr := protocol.Errorf(protocol.StaleContext, "the target changed after the proposal was made; nothing was executed")
	if sp.current != nil {
		perr = perr.With("currentVersion", sp.current.Version)
	}
	return c.closeProposal(ctx, closeParams{proposal: sp.proposal, status: store.ProposalConflict, decision: protocol.DecisionFailed,
		state: protocol.ConfirmationFailed, frames: true, err: perr})
}

// withTurnParams is a proposal closed because its turn ends with status;
// by is who cancelled the turn ("" for none: it ended by itself).
type withTurnParams struct {
	proposal store.Proposal
	status   store.TurnStatus // the turn's terminal status
	by       string
}

// cancelWithTurn: its turn is ending before anyone decided.
func (c *Coordinator) cancelWithTurn(ctx context.Context, wp withTurnParams) error {
	perr := protocol.Errorf(protocol.Cancelled, "the turn was cancelled before the operator decided; nothing was changed")
	if wp.status != store.TurnCancelled {
		perr = protocol.Errorf(protocol.Cancelled, "the turn ended before the operator decided; nothing was changed")
	}
	_, _, err := c.closeProposal(ctx, closeParams{proposal: wp.proposal, status: store.ProposalCancelled, decision: protocol.DecisionDenied,
		state: protocol.ConfirmationDenied, frames: true, err: perr, by: wp.by})
	if protocol.IsCode(err, protocol.Conflict) && !store.IsFenced(err) {
		return nil // decided meanwhile (by another daemon)
	}
	return err
}

// orphanParams is a pending proposal whose turn ended without it.
type orphanParams struct{ proposal store.Proposal }

// cancelOrphan: its turn ended without it (a daemon that died between
// storing the proposal and parking its turn). No frames: the turn is over.
func (c *Coordinator) cancelOrphan(ctx context.Context, op orphanParams) (store.Proposal, bool, error) {
	p, code := op.proposal, string(protocol.ServiceRestarted)
	out, resumed, err := c.closeProposal(ctx, closeParams{proposal: p, status: store.ProposalCancelled, decision: protocol.DecisionDenied,
		code: &code, err: protocol.Errorf(protocol.ServiceRestarted, "its turn ended before the proposal was decided")})
	if err == nil {
		c.log.Warn("cancelled a proposal whose turn had ended", "proposal", p.ID)
	}
	if protocol.IsCode(err, protocol.Conflict) {
		return out, resumed, nil
	}
	return out, resumed, err
}

// amendParams is an amendment: the pending proposal, the new one that
// replaces it (newProposal, submitted by the amender) and the amending
// principal's name.
type amendParams struct {
	proposal store.Proposal
	amended  store.Proposal
	by       string
	now      time.Time
}

// amendProposal: pending to cancelled (audited as denied, reason amended)
// and the amended proposal pending in its place, with the link between
// them in the audit, in one transaction; the turn stays parked.
func (c *Coordinator) amendProposal(ctx context.Context, ap amendParams) (store.Proposal, error) {
	p, np, now := ap.proposal, ap.amended, ap.now
	linkActor := ap.by
	if linkActor == "" {
		linkActor = protocol.AuditActor
	}
	closed := p
	closed.CompletedAt = &now
	reason := protocol.ReasonAmended
	link, err := protocol.Marshal(protocol.AmendAudit{ConversationID: p.ConversationID, RequestID: p.RequestID, ProposalID: p.ID,
		AmendedBy: np.ID, CommandType: p.CommandType, CommandHashBefore: p.CommandHash, CommandHashAfter: np.CommandHash})
	if err != nil {
		return store.Proposal{}, err
	}
	out, err := c.store.AmendProposal(ctx, store.AmendProposalParams{ID: p.ID, Proposal: np, Now: now,
		Audit: auditRow(closed, auditParams{decision: protocol.DecisionDenied, code: &reason, actor: ap.by, now: now}),
		Link:  store.AppendAdminEventParams{Actor: linkActor, Action: protocol.AmendAction, TargetID: &p.ID, Details: link, Now: now}})
	if err != nil {
		if protocol.IsCode(err, protocol.Conflict) || protocol.IsCode(err, protocol.Validation) {
			return out, err
		}
		return out, c.auditUnavailable("amend proposal", err)
	}
	c.obs.ProposalDecided(decidedOf(p, protocol.DecisionDenied))
	return out, nil
}

// confirmParams is a confirm: the proposal and the confirming principal's
// name.
type confirmParams struct {
	proposal store.Proposal
	by       string
}

// confirmProposal: pending to executing with the confirmed audit row and
// frame, before anything executes (docs/design.md §9.3, step 5; §10).
func (c *Coordinator) confirmProposal(ctx context.Context, cp confirmParams) (store.Proposal, error) {
	p, by, now := cp.proposal, cp.by, c.now()
	confirmed := p
	confirmed.ConfirmedAt = &now
	// This daemon takes the command: its instance must be live and its
	// lease provably current (holding).
	ctx = c.holding(ctx)
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

// auditRow builds the admin_events row (docs/design.md §10) for one proposal
// transition.
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
	by            string           // a cancel's principal, as the owner took it in ("" for none)
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
	by := ""
	if p.status == store.TurnCancelled && len(open) > 0 {
		// The canceller denies the proposals the cancel closes: the one
		// the owner took in, else the one recorded (another daemon, a
		// restart in between).
		if by = p.by; by == "" {
			if t, err := c.store.GetTurn(ctx, p.turn.RequestID); err == nil {
				by = t.CancelRequestedBy
			}
		}
	}
	for _, prop := range open {
		if err := c.cancelWithTurn(ctx, withTurnParams{proposal: prop, status: p.status, by: by}); err != nil {
			return err
		}
	}
	_, _, err = c.store.FinishTurn(ctx, store.FinishTurnParams{RequestID: p.turn.RequestID, Status: p.status, Error: p.err, Now: c.now(),
		Instance: c.cfg.Instance})
	if err == nil {
		c.lineMoved(p.turn.ConversationID) // the first waiting turn, if any, is the active one now
	}
	if protocol.IsCode(err, protocol.Conflict) && !store.IsFenced(err) {
		return nil
	}
	return err
}

// amendedNote adds to an amended proposal's tool result what the model
// must know: the operator changed its command, and this one ran.
func amendedNote(p store.Proposal, result map[string]any) map[string]any {
	if p.AmendedFrom == nil {
		return result
	}
	result["amendedFrom"] = *p.AmendedFrom
	result["executedCommand"] = p.Command
	result["note"] = "The operator amended your proposed command before confirming it; executedCommand is what ran, not what you proposed."
	return result
}

// amendedError adds the same to a failed or refused amended proposal's
// tool error.
func amendedError(p store.Proposal, err *protocol.Error) *protocol.Error {
	if p.AmendedFrom == nil || err == nil {
		return err
	}
	return err.With("amendedFrom", *p.AmendedFrom).With("amendedCommand", p.Command)
}
