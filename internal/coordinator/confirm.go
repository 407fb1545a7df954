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
// over.

// confirm runs a pending proposal to its end (docs/design.md §9.3, steps 4-7): its
// checks and its confirmation here, its execution in executeConfirmed.
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
	cmd, err := studio.DecodeCommand(p.CommandType, p.Command)
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
	err = o.durable("confirm proposal", func(ctx context.Context) error {
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
	return o.executeConfirmed(ctx, r, cmd, p)
}

// executeConfirmed executes a proposal its owner just confirmed (now
// executing), records its outcome, answers the decision and its repeats,
// and picks the turn's next step (docs/design.md §9.3, steps 6-7).
func (o *owner) executeConfirmed(ctx context.Context, r decisionRequest, cmd studio.Command, p store.Proposal) (step, bool) {
	c := o.c
	result, execErr := o.execute(cmd, p)
	if execErr != nil && (store.IsFenced(execErr) || store.IsAlreadyExecuted(execErr)) {
		return o.executionLost(r, p, execErr)
	}
	var fin finished
	err := o.durable("record proposal result", func(ctx context.Context) error {
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
		fin = finished{proposal: cur, result: storedResult(cur), resumed: t.Status == store.TurnRunning && t.Owner == c.cfg.Instance}
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
		// fence makes it run at most once (store.Fence.Execute).
		err = store.RideOut(ctx, o.c.cfg.OutageBudget, o.c.abandon, func(wait time.Duration, err error) {
			o.c.log.Warn("execute proposal: the database is unavailable; retrying", "proposal", p.ID, "wait", wait, "err", err)
		}, func(ctx context.Context) error {
			var err error
			res, err = o.c.cfg.Commands.Execute(o.c.executing(ctx, p, true), cmd, studio.ExecOptions{Trigger: studio.TriggerOperator, ExpectedTarget: p.Target})
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
