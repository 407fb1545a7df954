package coordinator

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Work shared between daemons (Config.Shared): claims of queued turns,
// control notifications that reach an owner from another daemon, and the
// hand-over of queued turns at shutdown. Every step is a compare-and-set
// in the store; a notification only says "look again". A daemon alone
// with its database claims too: the turns that the end of another made
// active (waiting.go) are owned by no daemon until one claims them.

// announceWaiting tells the other daemons that a turn accepted here waits
// for a worker: one of theirs may be free.
func (c *Coordinator) announceWaiting(ctx context.Context, slot *ticket) {
	if !c.cfg.Shared || c.pool.granted(slot) {
		return
	}
	if err := c.store.Announce(ctx, store.TurnsQueued); err != nil {
		c.log.Warn("announce a queued turn", "err", err) // the others look again every ClaimInterval
	}
}

// announceQueued tells every daemon (this one too) that a queued turn
// owned by none waits to be claimed.
func (c *Coordinator) announceQueued(ctx context.Context) {
	if err := c.store.Announce(ctx, store.TurnsQueued); err != nil {
		c.log.Warn("announce a queued turn", "err", err) // the claims look again every ClaimInterval
	}
}

// claimLoop claims queued turns of other daemons (or of none) while a
// worker here is free and no turn here waits for one: when told a turn
// waits, and every ClaimInterval (a notification may be lost).
func (c *Coordinator) claimLoop() {
	defer c.wg.Done()
	timer := time.NewTimer(c.cfg.ClaimInterval)
	defer timer.Stop()
	for {
		queued := c.store.ControlSignal(store.TurnsQueued) // before the claim: no announcement is missed
		freed := c.pool.freed()
		slot := c.pool.idle()
		if slot == nil {
			select {
			case <-c.stopping:
				return
			case <-freed:
			}
			continue
		}
		if c.claimOne(slot) {
			continue // there may be more
		}
		select {
		case <-c.stopping:
			return
		case <-queued:
		case <-timer.C:
			timer.Reset(c.cfg.ClaimInterval)
		}
	}
}

// claimOne claims the oldest queued turn another daemon owns and runs it
// on slot's worker; it reports whether it claimed one.
func (c *Coordinator) claimOne(slot *ticket) bool {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed {
		c.pool.done(slot)
		return false
	}
	// A daemon reaped meanwhile, or that cannot prove its lease, claims
	// nothing (holding); each try has a call's deadline.
	if c.leaseErr() != nil {
		c.pool.done(slot)
		return false
	}
	ctx, cancel := c.call(c.holding(c.base))
	defer cancel()
	t, ok, err := c.store.ClaimTurn(ctx, store.ClaimTurnParams{Instance: c.cfg.Instance, Now: c.now()})
	if err != nil || !ok {
		c.pool.done(slot)
		if err != nil && c.base.Err() == nil {
			c.log.Warn("claim a queued turn", "err", err)
		}
		return false
	}
	c.log.Info("claimed a queued turn", "request", t.RequestID, "conversation", t.ConversationID)
	c.lineMoved(t.ConversationID)
	c.obs.TurnStarted(TurnStarted{ConversationID: t.ConversationID, RequestID: t.RequestID, Claimed: true})
	c.startOwner(t, phaseRunning, slot)
	return true
}

// cancelQueued cancels a turn that waits for a worker here through the
// store's compare-and-set: if another daemon claimed it meanwhile, the
// cancel is recorded for that daemon, which honours it. done is false
// when the store could not be asked; the usual ending retries then.
func (o *owner) cancelQueued() (next step, done bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), 10*time.Second)
	defer cancel()
	t, _, err := o.c.store.RequestCancel(ctx, store.RequestCancelParams{RequestID: o.turn.RequestID, By: o.cancelBy, Now: o.c.now()})
	if err != nil {
		return nil, false
	}
	o.answerCancels()
	if t.Status == store.TurnCancelled && t.Owner == "" {
		o.c.obs.TurnEnded(TurnEnded{ConversationID: t.ConversationID, RequestID: t.RequestID, Outcome: protocol.OutcomeCancelled,
			Duration: time.Since(o.since), Frames: 1})
	}
	return nil, true
}

// handOver gives a turn that waits for a worker back to the shared queue
// at shutdown, for a daemon that stays to claim; it reports whether the
// turn is no longer this daemon's (handed over, or claimed or ended
// elsewhere meanwhile).
func (o *owner) handOver() bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), 10*time.Second)
	defer cancel()
	_, err := o.c.store.ReleaseTurn(ctx, store.ReleaseTurnParams{RequestID: o.turn.RequestID, From: o.c.cfg.Instance})
	switch {
	case err == nil:
		o.c.log.Info("turn interrupted by shutdown", "conversation", o.turn.ConversationID, "request", o.turn.RequestID,
			"phase", "queued", "outcome", "handed_over")
		o.answerCancels()
		return true
	case protocol.IsCode(err, protocol.Conflict):
		o.answerCancels()
		return true
	}
	o.c.log.Warn("hand a queued turn over", "conversation", o.turn.ConversationID, "request", o.turn.RequestID, "err", err)
	return false
}

// elsewhere reports whether another live daemon runs the turn (or holds it
// queued): then only that daemon may end it.
func (c *Coordinator) elsewhere(t store.Turn) bool {
	if t.Owner == "" || t.Owner == c.cfg.Instance {
		return false
	}
	return t.Status == store.TurnRunning || t.Status == store.TurnQueued
}

// cancelElsewhere records the cancel of a turn another daemon owns — a
// queued one ends at once — and waits, up to RemoteCancelWait, for that
// daemon to end it: the record notifies it, so its model stream stops
// at once. It answers the turn as it then is.
func (c *Coordinator) cancelElsewhere(ctx context.Context, t store.Turn) (protocol.Turn, error) {
	sig := c.store.FrameSignal(t.ConversationID) // before the cancel: its done frame is not missed
	t, _, err := c.store.RequestCancel(ctx, store.RequestCancelParams{RequestID: t.RequestID, By: principalName(ctx), Now: c.now()})
	if err != nil {
		return protocol.Turn{}, err
	}
	wait := time.NewTimer(c.cfg.RemoteCancelWait)
	defer wait.Stop()
	for !t.Status.Terminal() {
		select {
		case <-sig:
		case <-wait.C:
			return turnView(t), nil
		case <-ctx.Done():
			return protocol.Turn{}, ctx.Err()
		}
		sig = c.store.FrameSignal(t.ConversationID)
		if t, err = c.store.GetTurn(ctx, t.RequestID); err != nil {
			return protocol.Turn{}, err
		}
	}
	return turnView(t), nil
}
