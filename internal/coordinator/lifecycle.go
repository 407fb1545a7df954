package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Recover makes the store true after a previous process stopped, then
// starts the sweeper (docs/design.md §6). A daemon alone with its
// database (not Shared) knows every earlier process is gone:
//   - turns left queued or running are failed with service_restarted;
//   - a proposal left executing is indeterminate — its outcome is unknown,
//     so it never runs again: its audit trail says so, its turn fails,
//     doctor lists it and reconcile_proposal records what really happened;
//   - a turn awaiting confirmation keeps its proposal confirmable (the
//     stored frames are its resume handle): it gets an owner, parked.
//
// A daemon that shares its database touches none of that: the work of
// other daemons, live or dead, is theirs until their lease expires, and
// then the reaper's (ReapOrphans); it starts claiming queued turns. Both
// cancel a pending proposal whose turn ended.
func (c *Coordinator) Recover(ctx context.Context) error {
	if !c.cfg.Shared {
		if err := c.recoverAlone(ctx); err != nil {
			return err
		}
	}
	pending, err := c.store.ListProposals(ctx, store.ListProposalsParams{Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 1000})
	if err != nil {
		return err
	}
	for _, p := range pending {
		t, err := c.store.GetTurn(ctx, p.RequestID)
		if err != nil {
			return err
		}
		switch {
		case t.Status.Terminal():
			if _, _, err := c.cancelOrphan(ctx, orphanParams{proposal: p}); err != nil {
				return err
			}
		case t.Status == store.TurnAwaitingConfirmation && !c.cfg.Shared:
			if _, err := c.ownerFor(t); err != nil {
				return err
			}
		case t.Status == store.TurnAwaitingConfirmation && t.CancelRequestedAt != nil:
			// A cancel recorded while no daemon held the parked turn (an
			// interrupt whose daemon stopped before delivering it): the
			// adopted owner honours it.
			if _, err := c.ownerFor(t); err != nil {
				return err
			}
		}
	}
	if err := c.expireDue(ctx, true); err != nil {
		return err
	}
	c.life.RLock()
	if !c.closed {
		if c.cfg.SweepInterval > 0 {
			c.wg.Add(1)
			go c.sweep()
		}
		// Alone too: a turn that the end of another made active (or that
		// recovery left queued behind a failed one) waits to be claimed.
		c.wg.Add(1)
		go c.claimLoop()
	}
	c.life.RUnlock()
	return nil
}

// recoverAlone ends what earlier processes left unfinished in a database
// this daemon holds alone, and marks their instances reaped.
func (c *Coordinator) recoverAlone(ctx context.Context) error {
	if _, err := c.store.ReapInstances(ctx, store.ReapInstancesParams{Now: c.now(), Except: c.cfg.Instance, All: true}); err != nil {
		return err
	}
	turns, err := c.store.RecoverTurns(ctx, store.RecoverTurnsParams{Now: c.now()})
	for _, t := range turns {
		c.log.Warn("failed turn interrupted by restart", "conversation", t.ConversationID, "request", t.RequestID)
		// Its error and done frames.
		c.obs.TurnEnded(TurnEnded{ConversationID: t.ConversationID, RequestID: t.RequestID, Outcome: protocol.OutcomeFailed,
			ErrorCode: protocol.ServiceRestarted, Frames: 2, Recovered: true})
	}
	if err != nil {
		return err
	}
	return c.recoverExecuting(ctx)
}

// recoverExecuting marks the proposals a previous process left executing
// indeterminate (once) and fails their turns.
func (c *Coordinator) recoverExecuting(ctx context.Context) error {
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{Statuses: []store.ProposalStatus{store.ProposalExecuting}, Limit: 1000})
	if err != nil {
		return err
	}
	for _, p := range ps {
		c.mu.Lock()
		_, owned := c.owners[p.RequestID]
		c.mu.Unlock()
		if owned {
			continue
		}
		t, err := c.store.GetTurn(ctx, p.RequestID)
		if err != nil {
			return err
		}
		var in *indeterminate
		if p.Owner != "" {
			// Its executor is gone: the proposal is taken from it with its
			// indeterminate audit row.
			if _, err := c.store.DisownProposal(ctx, store.DisownProposalParams{ID: p.ID, From: p.Owner, Audit: c.indeterminateRow(p)}); err != nil {
				return err
			}
			c.indeterminateDone(p)
		} else {
			in = &indeterminate{proposal: p}
		}
		if t.Status.Terminal() {
			if in != nil {
				if err := c.markIndeterminate(ctx, *in); err != nil {
					return err
				}
			}
			continue
		}
		if t, err = c.store.AdoptTurn(ctx, store.AdoptTurnParams{RequestID: t.RequestID, From: t.Owner, To: c.cfg.Instance}); err != nil {
			return err
		}
		perr := protocol.Errorf(protocol.ServiceRestarted,
			"the daemon stopped while the confirmed command was executing; its outcome is unknown and it will not run again until reconciled").
			With("proposalId", p.ID)
		if err := c.endTurn(ctx, endParams{turn: t, status: store.TurnFailed, err: perr, indeterminate: in}); err != nil {
			return err
		}
	}
	return nil
}

// sweep expires due proposals and effects until shutdown.
func (c *Coordinator) sweep() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stopping:
			return
		case <-t.C:
			if c.leaseErr() != nil {
				continue // self-fenced: another daemon's sweeper expires them
			}
			if err := c.expireDue(c.base, false); err != nil && c.base.Err() == nil {
				c.log.Error("expire proposals", "err", err)
			}
			if _, err := c.store.ExpireEffects(c.base, store.ExpireEffectsParams{Now: c.now()}); err != nil && c.base.Err() == nil {
				c.log.Error("expire effects", "err", err)
			}
		}
	}
}

// expireDue hands every pending proposal past its expiry to its turn's
// owner to expire; with wait it waits until they are.
func (c *Coordinator) expireDue(ctx context.Context, wait bool) error {
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 1000})
	if err != nil {
		return err
	}
	var replies []chan decisionReply
	for _, p := range ps {
		if c.now().Before(p.ExpiresAt) {
			continue
		}
		reply, err := c.sendDecision(ctx, p, decideExpire)
		if err != nil {
			return err
		}
		if reply != nil {
			replies = append(replies, reply)
		}
	}
	if !wait {
		return nil
	}
	for _, r := range replies {
		select {
		case res := <-r:
			if res.err != nil {
				return res.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// TurnsInFlight is how many turns this daemon holds now: queued for a
// worker, talking to the model, or parked on a person's decision.
func (c *Coordinator) TurnsInFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.owners)
}

// Shutdown stops accepting turns; parked turns stay parked (their
// proposals survive the restart) and queued ones end; running turns get the
// grace period, then end failed with service_restarted; a confirmed command
// that is executing finishes and its result is recorded. When ctx ends
// first, writes still being retried give up: the next start's recovery
// ends those turns.
func (c *Coordinator) Shutdown(ctx context.Context) {
	c.shutdownOnce.Do(func() {
		c.life.Lock()
		c.closed = true
		c.life.Unlock()
		close(c.stopping)
	})
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	grace := time.NewTimer(c.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
	case <-ctx.Done():
	}
	c.stop(errShutdown)
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	c.abandonOnce.Do(func() { close(c.abandon) })
	<-done
}

// shutdown guards, kept beside Shutdown.
type onces struct {
	shutdownOnce sync.Once
	abandonOnce  sync.Once
}

// isStopping reports whether Shutdown has begun.
func (c *Coordinator) isStopping() bool {
	select {
	case <-c.stopping:
		return true
	default:
		return false
	}
}
