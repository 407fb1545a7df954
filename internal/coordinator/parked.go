package coordinator

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// A turn parked on a human: its owner holds no worker and takes its
// mailbox's requests one at a time. A decision is applied here
// (applyDecision): expire, deny and amend end or replace the proposal;
// confirm runs it (confirm.go). A cancel ends the turn (ending.go).

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
			if !o.cancelWanted {
				o.cancelWanted, o.cancelBy = true, r.by
			}
			o.cancelWaiters = append(o.cancelWaiters, r.reply)
			return o.ending(store.TurnCancelled, nil)
		case recheckRequest: // the loop reads the turn again
		case reapRequest:
			o.takeover = &r.takeover
			return o.takenOver
		case decisionRequest:
			if next, moved := o.applyDecision(r); moved {
				return next
			}
		}
	}
}

// adopted starts an owner for a turn this process did not run: one parked
// before a restart, or by another daemon. Its counts come from the store.
func (o *owner) adopted() step {
	o.countAdopted()
	return o.parked
}

// applyDecision applies one decision while parked (deliverDecision sent
// it). moved says the owner leaves the parked step for next (continue,
// end, or step aside when nil).
func (o *owner) applyDecision(r decisionRequest) (next step, moved bool) {
	c := o.c
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), time.Minute)
	defer cancel()
	rctx, rcancel := c.call(ctx)
	p, err := c.store.GetProposal(rctx, r.proposalID)
	rcancel()
	if err != nil {
		r.answer(protocol.ProposalResult{}, err)
		return nil, false
	}
	if p.RequestID != o.turn.RequestID || p.Status != store.ProposalPending {
		r.answer(notPendingAnswer(r.kind, p))
		return nil, false
	}
	if !c.now().Before(p.ExpiresAt) {
		closed, resumed, err := c.expireProposal(ctx, expireParams{proposal: p})
		if err != nil {
			o.answerFailed(ctx, r, p.ID, err)
			return nil, false
		}
		if r.kind == decideExpire {
			r.answer(storedResult(closed), nil)
		} else {
			r.answer(notPendingAnswer(r.kind, closed))
		}
		return o.afterDecision(resumed)
	}
	switch r.kind {
	case decideExpire:
		r.answer(storedResult(p), nil) // not due: nothing to do
		return nil, false
	case decideAmend:
		o.amend(ctx, r, p)
		return nil, false
	case decideDeny:
		closed, resumed, err := c.denyProposal(ctx, denyParams{proposal: p, by: r.by})
		if err != nil {
			o.answerFailed(ctx, r, p.ID, err)
			return nil, false
		}
		r.answer(storedResult(closed), nil)
		return o.afterDecision(resumed)
	}
	return o.confirm(ctx, r, p)
}

// takenOver is the first step of an owner of a turn taken over from a
// dead daemon (reapTurn): the proposals it left executing are recorded
// from their markers (settleTakenOver), and the turn goes on here when a
// decision about it was answered — now, or before the daemon stopped —
// else it ends as o.takeover says.
func (o *owner) takenOver() step {
	c, tk := o.c, o.takeover
	o.countAdopted()
	resumed := false
	for _, id := range tk.proposals {
		var fin finished
		var settled bool
		err := o.durable("record a taken-over proposal", func(ctx context.Context) error {
			p, err := c.store.GetProposal(ctx, id)
			if err != nil || p.Status != store.ProposalExecuting || p.Owner != c.cfg.Instance {
				return err // recorded already, or not this daemon's
			}
			fin, err = c.settleTakenOver(ctx, p, true)
			settled = err == nil
			return err
		}, nil)
		if store.IsFenced(err) {
			o.lost("record a taken-over proposal", err)
			return nil
		}
		if err != nil {
			return o.ending(store.TurnFailed, c.serviceError("record a taken-over proposal", err))
		}
		if settled {
			o.frames += 2
			o.answerWaiting(id, fin.result)
			resumed = resumed || fin.resumed
		}
	}
	if !resumed && tk.resume && len(tk.proposals) == 0 {
		resumed = o.turn.Status == store.TurnRunning
	}
	if !resumed {
		return o.ending(store.TurnFailed, tk.err)
	}
	c.log.Info("a taken-over turn goes on here", "request", o.turn.RequestID, "conversation", o.turn.ConversationID)
	next, _ := o.afterDecision(true)
	return next
}

// countAdopted counts, for an owner that did not run the turn from its
// start, its proposals and model rounds so far from the store: the
// turn's limits hold across daemons.
func (o *owner) countAdopted() {
	ctx, cancel := o.c.call(context.WithoutCancel(o.ctx))
	defer cancel()
	if ps, err := o.c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: o.turn.RequestID, Limit: 1000}); err == nil {
		o.proposals = len(ps)
	}
	// At least one round per tool call: never more rounds than allowed.
	// Counted, not read: the turn may hold very many frames.
	if n, err := o.c.store.CountFrames(ctx, store.CountFramesParams{ConversationID: o.turn.ConversationID,
		RequestID: o.turn.RequestID, Type: protocol.FrameToolCall}); err == nil {
		o.rounds = max(o.rounds, int(n))
	}
}
