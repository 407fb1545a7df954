package coordinator

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ending is the step that ends the turn: the one place an owner's turn
// ends (see finish).
func (o *owner) ending(status store.TurnStatus, perr *protocol.Error) step {
	return func() step {
		o.finish(status, perr)
		return nil
	}
}

// finish ends the turn durably: its pipelined frames are settled, its
// open proposals are closed (audited as denied), an indeterminate audit row still owed is written, then the
// optional error frame and the done frame, the terminal status and the
// release of the conversation commit together (store.FinishTurn). A store
// that refuses is retried with capped backoff until the end is durable;
// meanwhile cancels are answered at once and decisions about proposals
// that are no longer pending too. Only the shutdown's deadline gives up,
// leaving the turn to the next start's recovery.
func (o *owner) finish(status store.TurnStatus, perr *protocol.Error) {
	c := o.c
	o.phase = phaseEnding
	c.pool.done(o.slot) // no worker is held while the store is retried
	o.slot = nil
	if o.fenced { // another daemon owns the turn now: it ends it
		o.answerCancels()
		return
	}
	// Every frame the turn emitted is durable before its done frame.
	if err := o.settle(); err != nil {
		if store.IsFenced(err) {
			o.lost("append frames", err)
			o.answerCancels()
			return
		}
		if status == store.TurnCompleted {
			// Frames of the answer never reached the store: the turn did not
			// complete (no client saw them).
			status, perr = store.TurnFailed, c.serviceError("append frames", err)
		}
	}
	wait := c.cfg.EndRetryBackoff
	for {
		ctx, cancel := c.call(context.WithoutCancel(o.ctx))
		err := c.endTurn(ctx, endParams{turn: o.turn, status: status, err: perr, indeterminate: o.indeterminate, by: o.cancelBy})
		cancel()
		if err == nil {
			break
		}
		if store.IsFenced(err) {
			o.lost("end turn", err)
			o.answerCancels()
			return
		}
		c.log.Error("end turn; retrying", "conversation", o.turn.ConversationID, "request", o.turn.RequestID, "status", status, "wait", wait, "err", err)
		o.answerCancels() // they learn the turn's state now, not when the store is back
		if !o.wait(wait, c.abandon) {
			c.log.Error("end turn: gave up at shutdown; the next start fails the turn", "conversation", o.turn.ConversationID, "request", o.turn.RequestID, "err", err)
			o.answerCancels()
			return
		}
		wait = min(2*wait, c.cfg.MaxEndRetryBackoff)
	}
	o.indeterminate = nil
	o.answerCancels()
	var code protocol.ErrorCode
	var message string
	if perr != nil {
		code, message = perr.Code, perr.Message
	}
	var model string
	if o.model != nil {
		model = o.model.Name
	}
	c.obs.TurnEnded(TurnEnded{ConversationID: o.turn.ConversationID, RequestID: o.turn.RequestID, Model: model, Outcome: status.Outcome(),
		ErrorCode: code, Error: message, Duration: time.Since(o.since), Frames: o.frames + 1})
}

// answerCancels answers the cancels that waited for the turn's end.
func (o *owner) answerCancels() {
	if len(o.cancelWaiters) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), 10*time.Second)
	defer cancel()
	v := o.view(ctx)
	for _, w := range o.cancelWaiters {
		w <- v
	}
	o.cancelWaiters = nil
}
