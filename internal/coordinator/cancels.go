package coordinator

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Requests an owner takes in while it works: cancels from its mailbox
// (takeCancels, answered with view), and from another daemon through the
// store's control notifications (watch, recheck); wait is a pause that
// takes them in.

// view is the turn as it is now (from the store; from memory when the store
// cannot answer), with the cancel request the owner holds.
func (o *owner) view(ctx context.Context) protocol.Turn {
	t, err := o.c.store.GetTurn(ctx, o.turn.RequestID)
	if err != nil {
		t = o.turn
	}
	if o.phase == phaseExecuting && t.Status == store.TurnAwaitingConfirmation {
		// Parked in the store while its confirmed command runs here: the
		// turn is working, not waiting for a human.
		t.Status = store.TurnRunning
	}
	if o.cancelWanted && t.CancelRequestedAt == nil && !t.Status.Terminal() {
		now := o.c.now()
		t.CancelRequestedAt = &now
	}
	return turnView(t)
}

// takeCancels takes in the cancel requests that arrived: the turn is to be
// cancelled, and the callers wait for the owner to do it, unless now says
// to answer them at once (the owner cannot act before something finishes).
func (o *owner) takeCancels(now bool) {
	o.recheck()
	for r := o.box.take(isCancel); r != nil; r = o.box.take(isCancel) {
		cr := r.(cancelRequest)
		if !o.cancelWanted {
			o.cancelWanted, o.cancelBy = true, cr.by
			if o.phase == phaseExecuting || o.phase == phaseRunning {
				// Durable, so the stored turn says so; best effort: the
				// owner honours the request whatever the store says.
				_, _, _ = o.c.store.RequestCancel(o.ctx, store.RequestCancelParams{RequestID: o.turn.RequestID, By: cr.by, Now: o.c.now()})
			}
		}
		reply := cr.reply
		if now {
			reply <- o.view(o.ctx)
		} else {
			o.cancelWaiters = append(o.cancelWaiters, reply)
		}
	}
}

// watch turns the control notifications about the owner's turn — a cancel
// recorded by another daemon, a claim — into a recheck in its mailbox,
// until the owner retires. The first recheck comes at once: a notification
// sent before the watch began is not lost.
func (o *owner) watch(requestID string) {
	defer o.c.wg.Done()
	key := store.TurnKey(requestID)
	for {
		sig := o.c.store.ControlSignal(key)
		o.box.putOnce(recheckRequest{}, isRecheck)
		select {
		case <-sig:
		case <-o.retired:
			return
		}
	}
}

// recheck takes a pending recheck in: the turn as another daemon left it.
// A cancel recorded there is the owner's to honour; a queued turn that is
// no longer queued here was claimed or ended there.
func (o *owner) recheck() {
	if o.box.take(isRecheck) == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), 10*time.Second)
	defer cancel()
	o.c.lineMoved(o.convID) // a turn may have joined or left the line behind this one
	t, err := o.c.store.GetTurn(ctx, o.turn.RequestID)
	if err != nil {
		return // the next notification, or the next model round, looks again
	}
	if o.phase == phaseQueued && (t.Status != store.TurnQueued || t.Owner != o.c.cfg.Instance) {
		o.moved = true
		return
	}
	if t.CancelRequestedAt != nil && !t.Status.Terminal() {
		o.cancelWanted = true
	}
}

// wait waits d, taking requests in meanwhile (cancels are answered at once
// while the turn is ending). It returns false early when stop closes or,
// unless the turn is ending, when a cancel arrives.
func (o *owner) wait(d time.Duration, stop <-chan struct{}) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return true
		case <-stop:
			return false
		case <-o.box.sig:
			ending := o.phase == phaseEnding
			o.takeCancels(ending)
			o.answerStaleDecisions()
			if o.cancelWanted && !ending {
				return false
			}
		}
	}
}
