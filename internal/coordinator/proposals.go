package coordinator

import (
	"context"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/app"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The proposal lifecycle (ADR D4, D8). A proposal is made by its turn's
// owner (propose) and every later transition is made by that owner too
// (decide, confirm; ending.go closes what is left open), with one
// function per transition below. Each transition is one store transaction
// with its audit row and frames.

// propose turns a command tool's output into a pending proposal (ADR D4
// steps 1-2): the command is validated against the current state by the
// application (a command that could not run is the tool's validation,
// not_found or conflict result, and no proposal), then stored with its
// canonical hash, target, summary, risk, a fresh idempotency key and expiry,
// and its proposal and confirmation(required) frames. If it cannot be
// stored the tool answers audit_unavailable and nothing will execute.
func (o *owner) propose(callID string, cmd app.Command) error {
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
	now := c.now()
	p, err := c.newProposal(prep, t.ConversationID, t.RequestID, callID, now)
	if err != nil {
		return err
	}
	err = o.durable("store proposal", func(ctx context.Context) error {
		_, err := c.store.CreateProposal(ctx, store.CreateProposalParams{Proposal: p, Now: now})
		return err
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

func (c *Coordinator) auditUnavailable(what string, err error) *protocol.Error {
	c.log.Error(what, "err", err)
	return protocol.Errorf(protocol.AuditUnavailable, "the proposal could not be recorded durably, so nothing will be executed; try again later")
}

// Confirm is ADR D4's confirmation: the request is checked here (hash, and
// the target version when given — omitted means the version the proposal
// was made for), then the turn's owner re-reads the proposal and its target,
// refuses an expired proposal, a changed target or an archived
// conversation, appends the confirmed audit row and moves the proposal to
// executing in one transaction, executes the command, records its result
// with its audit row and frames, and continues the turn. A proposal that is
// no longer pending answers its stored outcome.
func (c *Coordinator) Confirm(ctx context.Context, convID, proposalID string, req protocol.ConfirmProposalRequest) (protocol.ProposalResult, error) {
	if req.ExpectedCommandHash == "" {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Validation, "expectedCommandHash is required").With("field", "expectedCommandHash")
	}
	p, err := c.proposal(ctx, convID, proposalID)
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
	return c.decide(ctx, p, decideConfirm)
}

// sameVersion checks the client's expected target version against the
// proposal's; an omitted one is the proposal's own (ADR D4: optional).
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
	p, err := c.proposal(ctx, convID, proposalID)
	if err != nil {
		return protocol.ProposalResult{}, err
	}
	return c.decide(ctx, p, decideDeny)
}

// decide hands a decision to the owner of the proposal's turn and waits for
// its answer. A proposal that is no longer pending is answered from the
// store: that is a read, which changes nothing.
func (c *Coordinator) decide(ctx context.Context, p store.Proposal, kind decisionKind) (protocol.ProposalResult, error) {
	reply, err := c.send(ctx, p, kind)
	if err != nil || reply == nil {
		// p was read before send looked for an owner: a decision that won
		// the race meanwhile (and an owner that finished the turn since)
		// is in the store, not in p. Answer from what is stored now.
		if cur, gerr := c.store.GetProposal(ctx, p.ID); gerr == nil {
			p = cur
		}
		if kind == decideConfirm && p.Status == store.ProposalExecuting && p.Owner != "" {
			// Another daemon executes it: a repeat waits for the outcome,
			// as it does where the command runs.
			p = c.awaitOutcome(ctx, p)
		}
		return settledAnswer(kind, p)
	}
	select {
	case r := <-reply:
		if kind == decideConfirm && r.err == nil && r.result.Status == protocol.ResultExecuting && r.result.Error == nil {
			// A concurrent confirm that lost to another daemon's owner,
			// which executes it: wait for the outcome there.
			if cur, err := c.store.GetProposal(ctx, p.ID); err == nil && cur.Owner != "" && cur.Owner != c.cfg.Instance {
				return settledAnswer(kind, c.awaitOutcome(ctx, cur))
			}
		}
		return r.result, r.err
	case <-ctx.Done():
		return protocol.ProposalResult{}, ctx.Err()
	}
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

// send puts a decision in the mailbox of the proposal's turn's owner. It
// returns a nil channel when the proposal is settled already (answer from
// p), after closing a proposal whose turn ended without it (an orphan).
func (c *Coordinator) send(ctx context.Context, p store.Proposal, kind decisionKind) (chan decisionReply, error) {
	return c.sendRequest(ctx, p, decisionRequest{kind: kind, proposalID: p.ID})
}

// sendRequest is send for a request that carries more than its kind (an
// amendment's command).
func (c *Coordinator) sendRequest(ctx context.Context, p store.Proposal, r decisionRequest) (chan decisionReply, error) {
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
			_, _, err := c.cancelOrphan(ctx, p)
			return nil, err
		}
		return nil, nil
	}
	o.box.put(r)
	return r.reply, nil
}

// settledAnswer answers a decision about a proposal that is not pending:
// confirm and expiry get its stored outcome; deny gets conflict, unless the
// proposal was denied or cancelled with its turn (a repeat is answered the same).
func settledAnswer(kind decisionKind, p store.Proposal) (protocol.ProposalResult, error) {
	if p.Status == store.ProposalPending {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "proposal %s is still pending; try again", p.ID).
			With("status", string(p.Status))
	}
	if kind == decideAmend {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "proposal %s is %s; only a pending proposal can be amended", p.ID, p.Status).
			With("status", string(p.Status))
	}
	if kind == decideDeny && p.Status != store.ProposalCancelled {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "proposal %s is %s; only a pending proposal can be denied", p.ID, p.Status).
			With("status", string(p.Status))
	}
	return settled(p), nil
}

// parked waits for a human's decision about the turn's open proposal,
// holding no worker. Requests are taken in arrival order. On shutdown the
// owner leaves without ending the turn: it stays parked in the store, and
// its proposal confirmable, until the next start adopts it.
func (o *owner) parked() step {
	o.phase = phaseParked
	o.report(protocol.ProgressAwaitingConfirmation, nil)
	for {
		r := o.box.take(anyRequest)
		if r == nil {
			sig := o.c.store.FrameSignal(o.turn.ConversationID) // before the check: no commit is missed
			t, err := o.c.store.GetTurn(o.ctx, o.turn.RequestID)
			switch {
			case err != nil:
			case t.Status != store.TurnAwaitingConfirmation:
				return nil // it ended, or another daemon resumed it
			case t.CancelRequestedAt != nil:
				// A cancel recorded while no owner was here to take it
				// (a shutdown under way, another daemon).
				o.cancelWanted = true
				return o.ending(store.TurnCancelled, nil)
			}
			select {
			case <-o.box.sig:
			case <-sig:
			case <-o.c.stopping:
				return nil
			}
			continue
		}
		switch r := r.(type) {
		case cancelRequest:
			o.cancelWanted = true
			o.cancelWaiters = append(o.cancelWaiters, r.reply)
			return o.ending(store.TurnCancelled, nil)
		case recheckRequest: // the loop reads the turn again
		case reapRequest:
			return o.ending(store.TurnFailed, r.err)
		case decisionRequest:
			if next, moved := o.decide(r); moved {
				return next
			}
		}
	}
}

// adopted starts an owner for a turn this process did not run: one parked
// before a restart, or by another daemon. Its counts come from the store.
func (o *owner) adopted() step {
	if ps, err := o.c.store.ListProposals(o.ctx, store.ListProposalsParams{RequestID: o.turn.RequestID, Limit: 1000}); err == nil {
		o.proposals = len(ps)
	}
	if fs, err := o.c.turnFrames(o.ctx, o.turn); err == nil {
		for _, f := range fs { // at least one round per tool call: never more rounds than allowed
			if f.Type == protocol.FrameToolCall {
				o.rounds++
			}
		}
	}
	return o.parked
}

// decide applies one decision while parked. moved says the owner leaves
// the parked step for next (continue, end, or step aside when nil).
func (o *owner) decide(r decisionRequest) (next step, moved bool) {
	c := o.c
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), time.Minute)
	defer cancel()
	p, err := c.store.GetProposal(ctx, r.proposalID)
	if err != nil {
		r.answer(protocol.ProposalResult{}, err)
		return nil, false
	}
	if p.RequestID != o.turn.RequestID || p.Status != store.ProposalPending {
		r.answer(settledAnswer(r.kind, p))
		return nil, false
	}
	if !c.now().Before(p.ExpiresAt) {
		closed, resumed, err := c.expireProposal(ctx, p)
		if err != nil {
			o.answerFailed(ctx, r, p.ID, err)
			return nil, false
		}
		if r.kind == decideExpire {
			r.answer(settled(closed), nil)
		} else {
			r.answer(settledAnswer(r.kind, closed))
		}
		return o.afterDecision(resumed)
	}
	switch r.kind {
	case decideExpire:
		r.answer(settled(p), nil) // not due: nothing to do
		return nil, false
	case decideAmend:
		o.amend(ctx, r, p)
		return nil, false
	case decideDeny:
		closed, resumed, err := c.denyProposal(ctx, p, r.by)
		if err != nil {
			o.answerFailed(ctx, r, p.ID, err)
			return nil, false
		}
		r.answer(settled(closed), nil)
		return o.afterDecision(resumed)
	}
	return o.confirm(ctx, r, p)
}

// afterDecision continues the turn the decision resumed; a turn it did not
// resume runs in another daemon, so this owner steps aside.
func (o *owner) afterDecision(resumed bool) (step, bool) {
	switch {
	case !resumed:
		return nil, true
	case o.cancelWanted:
		return o.ending(store.TurnCancelled, nil), true
	}
	if o.c.isStopping() {
		return o.ending(store.TurnFailed, restartedError("the daemon shut down before this turn completed")), true
	}
	return o.resuming, true
}

// confirm runs a pending proposal to its end (ADR D4 steps 4-7).
func (o *owner) confirm(ctx context.Context, r decisionRequest, p store.Proposal) (step, bool) {
	c := o.c
	conv, err := c.store.GetConversation(ctx, p.ConversationID)
	if err != nil {
		r.answer(protocol.ProposalResult{}, err)
		return nil, false
	}
	if conv.Status != store.ConversationActive {
		r.answer(protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "the conversation is archived; its proposals can no longer be confirmed"))
		return nil, false
	}
	if c.cfg.Commands == nil {
		r.answer(protocol.ProposalResult{}, protocol.Errorf(protocol.Denied, "commands cannot be executed here"))
		return nil, false
	}
	// The stored command, decoded once: its target is re-read and it is
	// executed from this value.
	cmd, err := app.DecodeCommand(p.CommandType, p.Command)
	if err != nil {
		r.answer(protocol.ProposalResult{}, c.serviceError("decode stored command", err))
		return nil, false
	}
	target, err := c.cfg.Commands.ResolveTarget(ctx, cmd)
	if err != nil && !protocol.IsCode(err, protocol.NotFound) {
		r.answer(protocol.ProposalResult{}, err)
		return nil, false
	}
	if !sameTarget(p.Target, target, err) {
		closed, resumed, err := c.refuseStale(ctx, p, target)
		if err != nil {
			o.answerFailed(ctx, r, p.ID, err)
			return nil, false
		}
		res := settled(closed)
		if target != nil {
			res.Error = res.Error.With("currentVersion", target.Version)
		}
		r.answer(res, nil)
		return o.afterDecision(resumed)
	}
	id := p.ID
	pending := p
	err = o.durable("confirm proposal", func(ctx context.Context) error {
		var err error
		p, err = c.confirmProposal(ctx, pending, r.by)
		return err
	}, func(ctx context.Context) (bool, error) {
		// The confirmation committed if the proposal executes here now.
		cur, err := c.store.GetProposal(ctx, id)
		if err != nil || cur.Status != store.ProposalExecuting || cur.Owner != c.cfg.Instance {
			return false, err
		}
		p = cur
		return true, nil
	})
	if err != nil {
		if store.IsFenced(err) {
			o.lost("confirm proposal", err)
			r.answer(protocol.ProposalResult{}, protocol.Errorf(protocol.ServiceRestarted,
				"this daemon lost its lease before the proposal was confirmed; nothing was executed: confirm it again").With("proposalId", id))
			return nil, true
		}
		if !protocol.IsCode(err, protocol.Conflict) {
			err = c.auditUnavailable("confirm proposal", err)
		}
		o.answerFailed(ctx, r, id, err)
		return nil, false
	}
	o.frames++

	result, execErr := o.execute(cmd, p)
	if execErr != nil && (store.IsFenced(execErr) || store.IsAlreadyExecuted(execErr)) {
		return o.executionLost(r, p, execErr)
	}
	var fin finished
	err = o.durable("record proposal result", func(ctx context.Context) error {
		var err error
		fin, err = c.finishProposal(c.executing(ctx, p, false), finishParams{proposal: p, result: result, failure: execErr, frames: true, actor: r.by})
		return err
	}, func(ctx context.Context) (bool, error) {
		cur, err := c.store.GetProposal(ctx, p.ID)
		if err != nil || cur.Status == store.ProposalExecuting {
			return false, err
		}
		t, err := c.store.GetTurn(ctx, p.RequestID)
		if err != nil {
			return false, err
		}
		fin = finished{proposal: cur, result: settled(cur), resumed: t.Status == store.TurnRunning && t.Owner == c.cfg.Instance}
		return true, nil
	})
	if store.IsFenced(err) {
		return o.executionLost(r, p, err)
	}
	if err != nil {
		c.log.Error("persist proposal result", "proposal", p.ID, "err", err)
		perr := protocol.Errorf(protocol.AuditUnavailable,
			"the command ran but its result could not be recorded; the proposal stays executing and will not run again until reconciled")
		in := indeterminate{proposal: p, result: result, failure: execErr}
		if err := c.markIndeterminate(ctx, in); err != nil {
			c.log.Error("append indeterminate audit row; retried with the turn's end", "proposal", p.ID, "err", err)
			o.indeterminate = &in
		}
		r.answer(protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultExecuting, Error: perr}, nil)
		o.answerWaiting(p.ID, protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultExecuting, Error: perr})
		return o.ending(store.TurnFailed, perr), true
	}
	o.frames += 2
	r.answer(fin.result, nil)
	o.answerWaiting(p.ID, fin.result)
	if fin.resumed && o.cancelWanted {
		// Cancelled while the command executed: it ran, and the turn's
		// end says so.
		return o.ending(store.TurnCancelled, protocol.Errorf(protocol.Cancelled,
			"the turn was cancelled while the confirmed command executed: the command ran (its result is above), and the turn stopped there").
			With("proposalId", p.ID)), true
	}
	return o.afterDecision(fin.resumed)
}

// executionLost ends the owner's part in a confirmed command it can no
// longer see through: the fence refused its execution or the recording of
// its outcome (another daemon took the proposal over: its audit says
// indeterminate, and the command never runs after that), or an earlier try
// of its execution committed although its answer was lost (it ran once;
// its result is unknown). The owner writes nothing more about it; the
// decision is answered with what is known.
func (o *owner) executionLost(r decisionRequest, p store.Proposal, err error) (step, bool) {
	c := o.c
	var perr *protocol.Error
	if store.IsAlreadyExecuted(err) {
		perr = protocol.Errorf(protocol.AuditUnavailable,
			"the command ran once but its result could not be read back; the proposal stays executing and will not run again until reconciled").
			With("proposalId", p.ID)
		in := indeterminate{proposal: p}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), writeAttemptTimeout)
		if merr := c.markIndeterminate(ctx, in); merr != nil {
			o.indeterminate = &in
		}
		cancel()
		res := protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultExecuting, Error: perr}
		r.answer(res, nil)
		o.answerWaiting(p.ID, res)
		return o.ending(store.TurnFailed, perr), true
	}
	o.lost("execute proposal", err)
	perr = protocol.Errorf(protocol.ServiceRestarted,
		"this daemon lost its lease while the command was confirmed; another daemon took it over, and its outcome is recorded there").
		With("proposalId", p.ID)
	res := protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultExecuting, Error: perr}
	r.answer(res, nil)
	o.answerWaiting(p.ID, res)
	return nil, true
}

// executing is ctx fenced for a confirmed proposal's execution (execute:
// the command's own write, at most once) or for the recording of its
// outcome: the proposal must still be executing under this daemon at the
// epoch its confirmation gave it (store.Fence). Without other daemons
// there is nothing to fence.
func (c *Coordinator) executing(ctx context.Context, p store.Proposal, execute bool) context.Context {
	if !c.cfg.Shared {
		return ctx
	}
	return store.WithFence(ctx, store.Fence{Instance: c.cfg.Instance, ProposalID: p.ID, ProposalEpoch: p.Epoch, Execute: execute, Now: c.now()})
}

// answerFailed answers a decision whose transition failed. A conflict
// there means the proposal was no longer pending when the transition ran:
// another daemon's owner of the parked turn decided it first (the two
// read it pending; the store let one through). The decision then gets the
// stored outcome, as any decision about a settled proposal does.
func (o *owner) answerFailed(ctx context.Context, r decisionRequest, proposalID string, err error) {
	if !protocol.IsCode(err, protocol.Conflict) {
		r.answer(protocol.ProposalResult{}, err)
		return
	}
	cur, gerr := o.c.store.GetProposal(ctx, proposalID)
	if gerr != nil {
		r.answer(protocol.ProposalResult{}, gerr)
		return
	}
	if cur.Status == store.ProposalPending { // not a lost race: say what failed
		r.answer(protocol.ProposalResult{}, err)
		return
	}
	r.answer(settledAnswer(r.kind, cur))
}

func sameTarget(proposed, current *protocol.ResourceVersion, err error) bool {
	if proposed == nil {
		return current == nil && err == nil
	}
	return err == nil && current != nil && *current == *proposed
}

// execute runs the confirmed command on the owner's behalf. Its context is
// the daemon's, not a request's: nobody leaving interrupts it. Meanwhile
// the owner answers cancels at once (the turn ends after the result is
// recorded) and repeats of other decisions; repeated confirms of this
// proposal wait for its result.
func (o *owner) execute(cmd app.Command, p store.Proposal) (jsontext.Value, *protocol.Error) {
	o.phase = phaseExecuting
	o.executing = p.ID
	o.report(protocol.ProgressExecuting, func(tp *protocol.TurnProgress) { tp.ProposalID = p.ID })
	defer func() { o.executing = "" }()
	var res app.Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), 10*time.Minute)
		defer cancel()
		// Through a database outage the command is tried again: its
		// fence makes it run at most once (store.Fence.Execute).
		err = store.RideOut(ctx, o.c.cfg.OutageBudget, o.c.abandon, func(wait time.Duration, err error) {
			o.c.log.Warn("execute proposal: the database is unavailable; retrying", "proposal", p.ID, "wait", wait, "err", err)
		}, func(ctx context.Context) error {
			var err error
			res, err = o.c.cfg.Commands.Execute(o.c.executing(ctx, p, true), cmd, app.ExecOptions{Trigger: app.TriggerOperator, ExpectedTarget: p.Target})
			return err
		})
	}()
	for {
		select {
		case <-done:
			if store.IsFenced(err) || store.IsAlreadyExecuted(err) {
				return nil, protocol.ErrorOf(err) // not the model's: the owner stops (executionLost)
			}
			if err != nil {
				return nil, toolError(o.c, err)
			}
			b, jerr := res.JSON()
			if jerr != nil {
				return nil, toolError(o.c, jerr)
			}
			return clean(b), nil
		case <-o.box.sig:
			o.takeCancels(true)
			o.answerStaleDecisions()
		}
	}
}

// answerWaiting answers the repeated confirms of a proposal that waited for
// its execution.
func (o *owner) answerWaiting(proposalID string, res protocol.ProposalResult) {
	for {
		r := o.box.take(func(r request) bool {
			d, ok := r.(decisionRequest)
			return ok && d.proposalID == proposalID
		})
		if r == nil {
			return
		}
		d := r.(decisionRequest)
		if d.kind == decideDeny || d.kind == decideAmend {
			d.answer(protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "proposal %s was confirmed; only a pending proposal can be denied or amended", proposalID).
				With("status", string(store.ProposalExecuting)))
			continue
		}
		d.answer(res, nil)
	}
}

// answerStaleDecisions answers at once the decisions about proposals that
// are not pending (except the one executing): they change nothing. The
// others wait for the owner to park.
func (o *owner) answerStaleDecisions() {
	o.box.mu.Lock()
	var pending []decisionRequest
	for _, r := range o.box.q {
		if d, ok := r.(decisionRequest); ok && d.proposalID != o.executing {
			pending = append(pending, d)
		}
	}
	o.box.mu.Unlock()
	for _, d := range pending {
		p, err := o.c.store.GetProposal(o.ctx, d.proposalID)
		if err != nil || (p.Status == store.ProposalPending && o.phase != phaseEnding) {
			continue
		}
		if o.box.take(func(r request) bool { return r == request(d) }) == nil {
			continue
		}
		if p.Status == store.ProposalPending { // the turn is ending: it will be cancelled
			d.answer(protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "the turn of proposal %s is ending; it will not be executed", p.ID).
				With("status", string(p.Status)))
			continue
		}
		d.answer(settledAnswer(d.kind, p))
	}
}

// --- transitions ------------------------------------------------------------

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

// SettleProposal records the real outcome of a proposal left executing
// (indeterminate), for reconcile_proposal: through finishProposal, the
// code a confirmed execution finishes with, with the application's own
// audit row in the same transaction. Nothing executes.
func (c *Coordinator) SettleProposal(ctx context.Context, s app.Settlement) error {
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

// settled answers with a proposal's stored state.
func settled(p store.Proposal) protocol.ProposalResult {
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

// --- reads --------------------------------------------------------------------

// proposal finds a visible conversation's proposal.
func (c *Coordinator) proposal(ctx context.Context, convID, proposalID string) (store.Proposal, error) {
	return ofConversation(ctx, c, convID, "proposal", proposalID, c.store.GetProposal, func(p store.Proposal) string { return p.ConversationID })
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
	if _, err := c.conversation(ctx, p.ConversationID); err != nil {
		return protocol.ProposalState{}, notFound
	}
	return proposalView(p), nil
}

// ProposalQuery filters proposals: of one conversation when ConversationID
// is set; Status is a comma-separated list of states ("" for all).
type ProposalQuery struct {
	ConversationID string
	Status         string
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
	out := make([]protocol.ProposalState, 0, len(ps))
	visible := map[string]bool{}
	for _, p := range ps {
		if q.ConversationID == "" {
			ok, seen := visible[p.ConversationID]
			if !seen {
				conv, err := c.store.GetConversation(ctx, p.ConversationID)
				ok = err == nil && conv.Status != store.ConversationDeleted
				visible[p.ConversationID] = ok
			}
			if !ok {
				continue
			}
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
			IdempotencyKey: p.IdempotencyKey, ExpiresAt: protocol.Timestamp(p.ExpiresAt), Amends: p.AmendedFrom},
		ConversationID: p.ConversationID, RequestID: p.RequestID, Status: string(p.Status), Result: p.Result, ErrorCode: p.ErrorCode,
		CreatedAt: protocol.Timestamp(p.CreatedAt), ConfirmedAt: stamp(p.ConfirmedAt), CompletedAt: stamp(p.CompletedAt),
		SubmittedBy: p.SubmittedBy, DecidedBy: p.DecidedBy,
	}
}

// newProposal is a pending proposal of a prepared command, answering the
// tool call callID of a turn: a new id, idempotency key and expiry.
func (c *Coordinator) newProposal(prep app.Prepared, convID, requestID, callID string, now time.Time) (store.Proposal, error) {
	id := uuid.NewString()
	hash, err := protocol.ProposalHash(prep.Canonical, id) // bound to this proposal: never the same twice
	if err != nil {
		return store.Proposal{}, err
	}
	return store.Proposal{ID: id, ConversationID: convID, RequestID: requestID, CallID: callID,
		CommandType: prep.Type, Command: prep.Canonical, CommandHash: hash, Target: prep.Target, Risk: prep.Risk,
		Impact: string(prep.Impact), TargetName: prep.TargetName, Summary: prep.Summary,
		IdempotencyKey: uuid.NewString(), ExpiresAt: now.Add(c.cfg.ProposalTTL)}, nil
}

// principalName is the name of the principal a request acts for: the
// audit's actor for what it causes ("" when none, then studio_operator).
func principalName(ctx context.Context) string {
	p, _ := protocol.PrincipalFrom(ctx)
	return p.Name
}
