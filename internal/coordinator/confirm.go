package coordinator

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// The confirm path on the owner's side (docs/design.md §9.3, steps 4-7):
// re-read the proposal's target, move the proposal to executing
// (confirmProposal), execute the command while answering cancels and repeats,
// record its outcome (finishProposal), or stop when another daemon took it
// over. Every database call has its deadline (Config.CallTimeout), and a
// daemon that cannot prove its lease confirms and executes nothing
// (self-fencing, selffence.go): the decision is answered at once, whatever
// the owner still has to find out.

// confirm runs a pending proposal to its end (docs/design.md §9.3, steps 4-7): its
// checks and its confirmation here, its execution in executeConfirmed.
func (o *owner) confirm(ctx context.Context, r decisionRequest, p store.Proposal) (step, bool) {
	c := o.c
	if pe := c.leaseErr(); pe != nil {
		r.answer(protocol.ProposalResult{}, pe)
		return nil, false
	}
	cctx, cancel := c.call(ctx)
	conv, err := c.store.GetConversation(cctx, p.ConversationID)
	cancel()
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
	cmd, err := studio.DecodeCommand(p.CommandType, p.Command)
	if err != nil {
		r.answer(protocol.ProposalResult{}, c.serviceError("decode stored command", err))
		return nil, false
	}
	cctx, cancel = c.call(ctx)
	target, err := c.cfg.Commands.ResolveTarget(cctx, cmd)
	cancel()
	if err != nil && !protocol.IsCode(err, protocol.NotFound) {
		r.answer(protocol.ProposalResult{}, err)
		return nil, false
	}
	if !sameTarget(p.Target, target, err) {
		closed, resumed, err := c.refuseStale(ctx, staleParams{proposal: p, current: target})
		if err != nil {
			o.answerFailed(ctx, r, p.ID, err)
			return nil, false
		}
		res := storedResult(closed)
		if target != nil {
			res.Error = res.Error.With("currentVersion", target.Version)
		}
		r.answer(res, nil)
		return o.afterDecision(resumed)
	}
	id := p.ID
	pending := p
	// Answered at once if the lease lapses while the confirmation's
	// outcome is unknown: a confirmation this daemon recorded is closed
	// as not executed by the daemon that takes its work over, or executed
	// here once it renews.
	unset := o.answerOnLapse(&r, func(pe *protocol.Error) (protocol.ProposalResult, error) {
		return protocol.ProposalResult{}, pe.With("proposalId", id)
	})
	err = o.durableLeased("confirm proposal", func(ctx context.Context) error {
		var err error
		p, err = c.confirmProposal(ctx, confirmParams{proposal: pending, by: r.by})
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
	unset()
	if err != nil {
		if store.IsLeaseUnproven(err) {
			// Refused before any try could have committed: nothing was
			// confirmed, the proposal is pending.
			r.answer(protocol.ProposalResult{}, err)
			return nil, false
		}
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
	return o.executeConfirmed(ctx, r, cmd, p)
}

// executeConfirmed executes a proposal its owner just confirmed (now
// executing), records its outcome, answers the decision and its repeats,
// and picks the turn's next step (docs/design.md §9.3, steps 6-7).
func (o *owner) executeConfirmed(ctx context.Context, r decisionRequest, cmd studio.Command, p store.Proposal) (step, bool) {
	c := o.c
	unset := o.answerOnLapse(&r, func(pe *protocol.Error) (protocol.ProposalResult, error) {
		return protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultExecuting, Error: protocol.Errorf(protocol.ServiceFailure,
			"this daemon cannot prove its lease: the confirmed command's outcome is not recorded here yet; it is, once the lease is renewed, "+
				"or by the daemon that takes this one's work over (the command then ran or did not, never twice): read the proposal for it").
			With("reason", pe.Details["reason"]).With("proposalId", p.ID)}, nil
	})
	defer unset()
	result, execErr := o.execute(cmd, p)
	if execErr != nil && (store.IsFenced(execErr) || store.IsAlreadyExecuted(execErr)) {
		return o.executionLost(r, p, execErr)
	}
	fp := finishParams{proposal: p, result: result, failure: execErr, frames: true, actor: r.by}
	fin, err := o.recordOutcome(fp)
	if store.IsFenced(err) {
		return o.executionLost(r, p, err)
	}
	if err != nil {
		c.log.Error("persist proposal result", "proposal", p.ID, "err", err)
		perr := protocol.Errorf(protocol.AuditUnavailable,
			"the command ran but its result could not be recorded; the proposal stays executing and will not run again until reconciled")
		if c.cfg.Shared {
			// Its outcome is known here, and its marker says it ran: it is
			// recorded as soon as the database takes it (or by the daemon
			// that takes this one's work over, from the marker).
			perr = protocol.Errorf(protocol.AuditUnavailable,
				"the command ran but its result could not be recorded yet; the proposal stays executing until it is, and will not run again").
				With("proposalId", p.ID)
			res := protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultExecuting, Error: perr}
			r.answer(res, nil)
			o.answerWaiting(p.ID, res)
			return o.recordLate(fp, perr)
		}
		in := indeterminate{proposal: p, result: result, failure: execErr}
		if err := c.markIndeterminate(ctx, in); err != nil {
			c.log.Error("append indeterminate audit row; retried with the turn's end", "proposal", p.ID, "err", err)
			o.indeterminate = &in
		}
		r.answer(protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultExecuting, Error: perr}, nil)
		o.answerWaiting(p.ID, protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultExecuting, Error: perr})
		return o.ending(store.TurnFailed, perr), true
	}
	return o.recorded(r, p, fin)
}

// recordOutcome records an executed proposal's outcome (finishProposal)
// through durable, fenced by the execution's ownership.
func (o *owner) recordOutcome(fp finishParams) (finished, error) {
	c, p := o.c, fp.proposal
	var fin finished
	err := o.durable("record proposal result", func(ctx context.Context) error {
		var err error
		fin, err = c.finishProposal(c.executing(ctx, p, false), fp)
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
		fin = finished{proposal: cur, result: storedResult(cur), resumed: t.Status == store.TurnRunning && t.Owner == c.cfg.Instance}
		return true, nil
	})
	return fin, err
}

// recorded answers a decision whose outcome is recorded, and the repeats
// that waited for it, and continues the turn.
func (o *owner) recorded(r decisionRequest, p store.Proposal, fin finished) (step, bool) {
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

// recordLate keeps trying to record an outcome the database did not take
// within the outage budget (shared databases: the execution's marker says
// the command ran, so its outcome is never left unknown), then continues
// the turn as the outcome's record says; perr ends it when the shutdown
// comes first, or when the record cannot resume it.
func (o *owner) recordLate(fp finishParams, perr *protocol.Error) (step, bool) {
	c := o.c
	wait := c.cfg.EndRetryBackoff
	for {
		fin, err := o.recordOutcome(fp)
		switch {
		case err == nil:
			o.frames += 2
			if fin.resumed {
				return o.afterDecision(true)
			}
			return o.ending(store.TurnFailed, perr), true
		case store.IsFenced(err):
			o.lost("record proposal result", err) // taken over: the new owner records it
			return nil, true
		}
		if !o.wait(wait, c.abandon) {
			return o.ending(store.TurnFailed, perr), true
		}
		wait = min(2*wait, c.cfg.MaxEndRetryBackoff)
	}
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
func (o *owner) execute(cmd studio.Command, p store.Proposal) (jsontext.Value, *protocol.Error) {
	o.phase = phaseExecuting
	o.executing = p.ID
	o.report(protocol.ProgressExecuting, func(tp *protocol.TurnProgress) { tp.ProposalID = p.ID })
	defer func() { o.executing = "" }()
	var res studio.Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), 10*time.Minute)
		defer cancel()
		// Through a database outage the command is tried again: its
		// fence makes it run at most once (store.Fence.Execute), and never
		// on a lease this daemon cannot prove (store.Fence.Lease). Each
		// try has the deadline of one call: a connection that hangs
		// fails it, and the next try takes another.
		err = store.RideOut(ctx, o.c.cfg.OutageBudget, o.c.abandon, func(wait time.Duration, err error) {
			o.c.log.Warn("execute proposal: the database is unavailable; retrying", "proposal", p.ID, "wait", wait, "err", err)
		}, func(ctx context.Context) error {
			ctx, cancel := o.c.call(ctx)
			defer cancel()
			var err error
			res, err = o.c.cfg.Commands.Execute(o.c.executing(ctx, p, true), cmd, studio.ExecOptions{Trigger: studio.TriggerOperator, ExpectedTarget: p.Target})
			return err
		})
	}()
	// The lease is looked at while the command runs: a decision waiting
	// for it is answered once the lease cannot be proven (lapsed).
	lease := time.NewTicker(leaseLook)
	defer lease.Stop()
	for {
		select {
		case <-lease.C:
			o.lapsed()
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

// leaseLook is how often an execution looks at the lease.
const leaseLook = 100 * time.Millisecond

// executing is ctx fenced for a confirmed proposal's execution (execute:
// the command's own write, at most once, and only on a lease this daemon
// can prove) or for the recording of its outcome: the proposal must still
// be executing under this daemon at the epoch its confirmation gave it
// (store.Fence). Without other daemons there is nothing to fence.
func (c *Coordinator) executing(ctx context.Context, p store.Proposal, execute bool) context.Context {
	if !c.cfg.Shared {
		return ctx
	}
	f := store.Fence{Instance: c.cfg.Instance, ProposalID: p.ID, ProposalEpoch: p.Epoch, Execute: execute, Now: c.now()}
	if execute {
		f.Lease = c.leaseCheck
	}
	return store.WithFence(ctx, f)
}

// executionLost ends the owner's part in a confirmed command it can no
// longer see through: the fence refused its execution or the recording of
// its outcome (another daemon took the proposal over, and records its
// outcome from its marker: the command never runs after that), or an
// earlier try of its execution committed although its answer was lost (it
// ran once). The decision is answered with what is known: a command that
// ran is recorded so here, its result read back from what it wrote.
func (o *owner) executionLost(r decisionRequest, p store.Proposal, err error) (step, bool) {
	c := o.c
	var perr *protocol.Error
	if store.IsAlreadyExecuted(err) && c.cfg.Shared {
		rctx, cancel := c.call(context.WithoutCancel(o.ctx))
		marked := p
		if cur, gerr := c.store.GetProposal(rctx, p.ID); gerr == nil {
			marked = cur
		}
		fp := finishParams{proposal: p, result: c.readBack(rctx, marked), frames: true, actor: r.by}
		cancel()
		fin, ferr := o.recordOutcome(fp)
		switch {
		case ferr == nil:
			return o.recorded(r, p, fin)
		case !store.IsFenced(ferr):
			perr = protocol.Errorf(protocol.AuditUnavailable,
				"the command ran once but its result could not be recorded yet; the proposal stays executing until it is, and will not run again").
				With("proposalId", p.ID)
			res := protocol.ProposalResult{ProposalID: p.ID, Status: protocol.ResultExecuting, Error: perr}
			r.answer(res, nil)
			o.answerWaiting(p.ID, res)
			return o.recordLate(fp, perr)
		}
		err = ferr // taken over meanwhile: the new owner records it
	}
	if store.IsAlreadyExecuted(err) {
		perr = protocol.Errorf(protocol.AuditUnavailable,
			"the command ran once but its result could not be read back; the proposal stays executing and will not run again until reconciled").
			With("proposalId", p.ID)
		in := indeterminate{proposal: p}
		ctx, cancel := c.call(context.WithoutCancel(o.ctx))
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

// readBack is the result of a command that executed on a daemon that
// stopped before recording it: what the command's own transaction wrote
// in its audit row (Proposal.ExecutedAuditID), marked as read back.
func (c *Coordinator) readBack(ctx context.Context, p store.Proposal) jsontext.Value {
	out := map[string]any{"readBack": true, "commandType": p.CommandType, "summary": p.Summary,
		"note": "the daemon that executed this command stopped before recording its result; this is what the command's own write recorded"}
	if p.ExecutedAt != nil {
		out["executedAt"] = protocol.Timestamp(*p.ExecutedAt)
	}
	if p.ExecutedAuditID > 0 {
		rows, err := c.store.ListAdminEvents(ctx, store.ListAdminEventsParams{BeforeID: p.ExecutedAuditID + 1, Limit: 1})
		if err == nil && len(rows) == 1 && rows[0].ID == p.ExecutedAuditID {
			out["auditId"], out["audit"] = rows[0].ID, jsontext.Value(rows[0].Details)
		}
	}
	b, err := protocol.Marshal(out)
	if err != nil {
		return jsontext.Value(`{"readBack":true}`)
	}
	return b
}
