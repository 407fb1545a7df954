package coordinator

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The steps of an owner before a human is asked, in the order a turn goes
// through them: queued (waiting for a worker) and resuming (a decided turn
// waiting for one again) both wait in waiting, then converse talks to the
// model (talk.go) and either parks (parked.go) or ends (ending.go). After
// a decision, afterDecision picks the next step: resuming, or the end.

// queued waits for the worker of a new turn.
func (o *owner) queued() step { return o.waiting }

// waiting waits for o.slot's worker, taking cancels in: a cancel, or the
// shutdown, ends the turn before it runs again.
func (o *owner) waiting() step {
	for {
		o.takeCancels(false)
		if o.moved {
			return nil // another daemon claimed or ended it: it is that daemon's now
		}
		if o.cancelWanted {
			if o.phase == phaseQueued && o.c.cfg.Shared {
				if next, done := o.cancelQueued(); done {
					return next
				}
			}
			return o.ending(store.TurnCancelled, nil)
		}
		o.answerStaleDecisions()
		select {
		case <-o.slot.granted:
			if o.phase == phaseQueued && o.c.isStopping() {
				// The worker came free as the daemon began to stop (the
				// turn that held it was interrupted): a turn that has not
				// started is handed over, not started to be cut short.
				return o.stopWaiting()
			}
			if o.phase == phaseQueued {
				var t store.Turn
				err := o.durable("start turn", func(ctx context.Context) error {
					var err error
					t, err = o.c.store.StartTurn(ctx, store.StartTurnParams{RequestID: o.turn.RequestID, Now: o.c.now(), Instance: o.c.cfg.Instance})
					return err
				}, func(ctx context.Context) (bool, error) {
					cur, err := o.c.store.GetTurn(ctx, o.turn.RequestID)
					if err == nil && cur.Status == store.TurnRunning && cur.Owner == o.c.cfg.Instance {
						t = cur
						return true, nil
					}
					return false, err
				})
				if protocol.IsCode(err, protocol.Conflict) {
					return nil // ended elsewhere (a cancel recorded by another daemon)
				}
				if err != nil {
					return o.ending(store.TurnFailed, o.c.serviceError("start turn", err))
				}
				o.turn = t
			}
			o.c.obs.TurnStarted(TurnStarted{ConversationID: o.turn.ConversationID, RequestID: o.turn.RequestID,
				QueueWait: time.Since(o.slot.since), Resumed: o.phase == phaseResuming})
			o.phase = phaseRunning
			o.report(protocol.ProgressWorking, nil)
			return o.converse
		case <-o.box.sig:
		case <-o.c.stopping:
			return o.stopWaiting()
		}
	}
}

// resuming waits for a worker to continue after a decision.
func (o *owner) resuming() step {
	o.phase = phaseResuming
	o.slot = o.c.pool.resume()
	o.report(protocol.ProgressQueued, nil)
	return o.waiting
}

// stopWaiting ends the wait for a worker at shutdown: a queued turn goes
// back to the shared queue (or fails, alone with its database); a resumed
// one fails.
func (o *owner) stopWaiting() step {
	if o.phase == phaseQueued {
		if o.c.cfg.Shared && o.handOver() {
			return nil
		}
		o.interruptedByShutdown("queued")
		return o.ending(store.TurnFailed, restartedError("the daemon shut down before this turn started"))
	}
	o.interruptedByShutdown("resuming")
	return o.ending(store.TurnFailed, restartedError("the daemon shut down before this turn completed"))
}

// interruptedByShutdown logs what the shutdown does to a turn of this
// daemon that it stopped in phase: it ends failed (service_restarted).
// A turn handed over to the other daemons is logged by handOver.
func (o *owner) interruptedByShutdown(phase string) {
	o.c.log.Info("turn interrupted by shutdown", "conversation", o.turn.ConversationID, "request", o.turn.RequestID,
		"phase", phase, "outcome", string(protocol.OutcomeFailed), "error_code", string(protocol.ServiceRestarted))
}

// converse holds a worker: it talks to the model until the turn ends or
// parks, then gives the worker back.
func (o *owner) converse() step {
	out := o.talk()
	o.c.pool.done(o.slot)
	o.slot = nil
	switch out.kind {
	case outcomeParked:
		return o.parked
	case outcomeInterrupted:
		if o.cancelWanted {
			return o.ending(store.TurnCancelled, nil)
		}
		o.interruptedByShutdown("running")
		return o.ending(store.TurnFailed, restartedError("the daemon shut down before this turn completed"))
	}
	return o.ending(out.status, out.err)
}

func restartedError(msg string) *protocol.Error {
	return protocol.Errorf(protocol.ServiceRestarted, "%s", msg)
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
