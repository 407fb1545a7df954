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

// Self-fencing. A daemon that shares its database holds a lease
// (internal/lease) that other daemons' reapers honour until it runs out;
// after that they take its work over. So a daemon that cannot prove its
// lease current — its renewals fail: the database, or the way to it,
// hangs — must act as if it were already reaped: it confirms, denies and
// expires no proposal, claims no turn, takes nothing over, and starts no
// command, until it renews. Decisions are answered service_failure with a
// retry hint (another daemon can take them), and a command's execution
// checks the lease inside its own transaction (store.Fence.Lease), so it
// never starts on a lease that ran out. What the daemon already runs goes
// on: a turn's frames are fenced by its instance (a reaping refuses them),
// and what it executes is ordered against a takeover by its proposal's row.

// LeaseHolder says whether this daemon holds its lease at now
// (lease.Keeper).
type LeaseHolder interface {
	Held(now time.Time) error
}

// leaseRef is the daemon's lease, set once it started (UseLease).
type leaseRef struct {
	mu sync.Mutex
	h  LeaseHolder
}

// UseLease makes the coordinator fence itself by h: set it when the lease
// started, before Recover (the lease is started after the coordinator is
// built: it needs the coordinator as a reaper).
func (c *Coordinator) UseLease(h LeaseHolder) {
	c.lease.mu.Lock()
	c.lease.h = h
	c.lease.mu.Unlock()
}

// leaseRetryAfter is the retry hint of a decision refused for an unproven
// lease: about a renewal later.
const leaseRetryAfter = time.Second

// leaseErr is nil while this daemon can prove its lease current (always,
// when it holds the database alone); else the refusal to answer with.
func (c *Coordinator) leaseErr() *protocol.Error {
	if !c.cfg.Shared {
		return nil
	}
	c.lease.mu.Lock()
	h := c.lease.h
	c.lease.mu.Unlock()
	if h == nil {
		return nil
	}
	err := h.Held(time.Now())
	if err == nil {
		return nil
	}
	pe := store.LeaseUnproven(c.cfg.Instance, err)
	pe.RetryAfterMs = leaseRetryAfter.Milliseconds()
	return pe
}

// leaseCheck is leaseErr as a fence's Lease check (store.Fence.Lease).
func (c *Coordinator) leaseCheck() error {
	if pe := c.leaseErr(); pe != nil {
		return pe
	}
	return nil
}

// holding is ctx fenced for a write that starts or takes over work (a
// confirmation, a claim, a takeover): this daemon's instance must be live
// and its lease provably current when the write's transaction runs.
func (c *Coordinator) holding(ctx context.Context) context.Context {
	if !c.cfg.Shared {
		return ctx
	}
	return store.WithFence(ctx, store.Fence{Instance: c.cfg.Instance, Hold: true, Lease: c.leaseCheck})
}
