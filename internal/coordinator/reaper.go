package coordinator

import (
	"context"
	"errors"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ReapOrphans ends the turns that reaped instances — daemons whose lease
// expired — left behind (store.OrphanedWork): the turn engine's part of
// recovery by lease. Each piece is taken over by one compare-and-set in
// the store, so whichever daemons reap at once, it ends exactly once:
//   - a running turn, or one awaiting confirmation while its confirmed
//     proposal executed on the dead daemon, is adopted — with that
//     proposal's indeterminate audit row, in the same transaction: its
//     outcome is unknown and it never runs again — and an owner here ends
//     it with error(service_restarted) and done(failed), retrying until
//     durable;
//   - a queued turn goes back to the shared queue, for any daemon with a
//     free worker to claim;
//   - a proposal left executing whose turn is not the dead daemon's is
//     marked indeterminate once.
//
// Turns parked on a human belong to no process and are left alone: any
// daemon continues them when the decision comes.
func (c *Coordinator) ReapOrphans(ctx context.Context, w store.OrphanedWork) error {
	if c.cfg.Shared {
		// A reaper that was itself reaped (paused, then resumed) takes
		// nothing over: the takeovers must commit while it is live.
		ctx = store.WithFence(ctx, store.Fence{Instance: c.cfg.Instance, Hold: true})
	}
	var errs []error
	errs = append(errs, c.recheckTakeovers(ctx))
	for _, t := range w.Turns {
		errs = append(errs, c.reapTurn(ctx, t))
	}
	for _, p := range w.Proposals {
		errs = append(errs, c.reapProposal(ctx, p))
	}
	return errors.Join(errs...)
}

// reapTurn takes over one turn of a dead daemon.
func (c *Coordinator) reapTurn(ctx context.Context, t store.Turn) error {
	if t.Status == store.TurnQueued {
		_, err := c.store.ReleaseTurn(ctx, store.ReleaseTurnParams{RequestID: t.RequestID, From: t.Owner})
		if err == nil {
			c.log.Warn("returned a dead daemon's queued turn to the queue", "request", t.RequestID, "instance", t.Owner)
		}
		return ignoreConflict(err)
	}
	var audits []store.IndeterminateAudit
	var executing []store.Proposal
	if t.Owner != "" {
		ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: t.RequestID,
			Statuses: []store.ProposalStatus{store.ProposalExecuting}, Limit: 10})
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.Owner == t.Owner {
				executing = append(executing, p)
				audits = append(audits, store.IndeterminateAudit{ProposalID: p.ID, Audit: c.indeterminateRow(p)})
			}
		}
	}
	perr := protocol.Errorf(protocol.ServiceRestarted,
		"the daemon running this turn stopped (its lease expired); the turn did not complete").With("instance", t.Owner)
	if len(executing) > 0 {
		perr = protocol.Errorf(protocol.ServiceRestarted,
			"the daemon executing the confirmed command stopped (its lease expired); its outcome is unknown and it will not run again until reconciled").
			With("proposalId", executing[0].ID).With("instance", t.Owner)
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed {
		return nil // a daemon that stays takes it over
	}
	adopted, err := c.store.AdoptTurn(ctx, store.AdoptTurnParams{RequestID: t.RequestID, From: t.Owner, To: c.cfg.Instance,
		Indeterminate: audits})
	if err != nil && store.Transient(err) {
		// The takeover may have committed although its answer was lost:
		// read the turn again, now or at the next look, never forget it
		// (an adopted turn is no longer orphaned work for anyone).
		var landed bool
		if adopted, landed, err = c.tookOver(ctx, t); err != nil {
			c.rememberTakeover(t)
			return err
		}
		if !landed {
			return nil // not taken: the next look finds it orphaned again
		}
	} else if err != nil {
		return ignoreConflict(err) // another reaper took it
	}
	for _, p := range executing {
		c.indeterminateDone(p)
	}
	c.endAdopted(adopted, t.Owner, perr)
	return nil
}

// endAdopted starts (or tells) the owner that ends a turn taken over from
// a dead daemon.
func (c *Coordinator) endAdopted(adopted store.Turn, from string, perr *protocol.Error) {
	t := adopted
	c.log.Warn("ending a turn whose daemon stopped", "request", t.RequestID, "conversation", t.ConversationID, "instance", from)
	c.mu.Lock()
	parked := c.owners[t.RequestID]
	c.mu.Unlock()
	if parked != nil {
		// A parked owner here while its proposal executed on the dead
		// daemon: it ends the turn.
		parked.box.put(reapRequest{err: perr})
		return
	}
	o := c.startOwnerWith(adopted, phaseReaped, nil, func(o *owner) { o.reaped = perr })
	if o.reaped == nil { // an owner started meanwhile (a decision adopted it)
		o.box.put(reapRequest{err: perr})
	}
}

// tookOver reads a turn whose takeover's commit went unanswered: landed
// says it is this daemon's now (the owner changed to it, at a later epoch
// than the reaper saw).
func (c *Coordinator) tookOver(ctx context.Context, t store.Turn) (store.Turn, bool, error) {
	cur, err := c.store.GetTurn(context.WithoutCancel(ctx), t.RequestID)
	if err != nil {
		return cur, false, err
	}
	return cur, cur.Owner == c.cfg.Instance && cur.Epoch > t.Epoch && !cur.Status.Terminal(), nil
}

// rememberTakeover keeps a takeover whose outcome could not be read, for
// the next look (recheckTakeovers).
func (c *Coordinator) rememberTakeover(t store.Turn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unsure == nil {
		c.unsure = map[string]store.Turn{}
	}
	c.unsure[t.RequestID] = t
}

// recheckTakeovers reads again the takeovers whose outcome was unknown and
// ends the turns that turn out to be this daemon's.
func (c *Coordinator) recheckTakeovers(ctx context.Context) error {
	c.mu.Lock()
	unsure := make([]store.Turn, 0, len(c.unsure))
	for _, t := range c.unsure {
		unsure = append(unsure, t)
	}
	c.mu.Unlock()
	var errs []error
	for _, t := range unsure {
		cur, landed, err := c.tookOver(ctx, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		delete(c.unsure, t.RequestID)
		c.mu.Unlock()
		if landed {
			c.life.RLock()
			if !c.closed {
				c.endAdopted(cur, t.Owner, protocol.Errorf(protocol.ServiceRestarted,
					"the daemon running this turn stopped (its lease expired); the turn did not complete").With("instance", t.Owner))
			}
			c.life.RUnlock()
		}
	}
	return errors.Join(errs...)
}

// reapProposal marks a proposal that a dead daemon left executing
// indeterminate, once; its turn runs on, or ended, elsewhere.
func (c *Coordinator) reapProposal(ctx context.Context, p store.Proposal) error {
	_, err := c.store.DisownProposal(ctx, store.DisownProposalParams{ID: p.ID, From: p.Owner, Audit: c.indeterminateRow(p)})
	if err != nil {
		return ignoreConflict(err)
	}
	c.indeterminateDone(p)
	return nil
}

// indeterminateRow is the audit row of a proposal whose outcome is unknown.
func (c *Coordinator) indeterminateRow(p store.Proposal) store.AppendAdminEventParams {
	now := c.now()
	done := p
	done.CompletedAt = &now
	return auditRow(done, auditParams{decision: protocol.DecisionIndeterminate, now: now})
}

// indeterminateDone reports an indeterminate proposal.
func (c *Coordinator) indeterminateDone(p store.Proposal) {
	c.obs.ProposalDecided(decidedOf(p, protocol.DecisionIndeterminate))
	c.log.Warn("proposal outcome is indeterminate (its daemon stopped while executing it); reconcile it",
		"proposal", p.ID, "command", p.CommandType, "instance", p.Owner)
}

func ignoreConflict(err error) error {
	if protocol.IsCode(err, protocol.Conflict) {
		return nil
	}
	return err
}
