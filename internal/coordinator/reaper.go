package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ReapOrphans ends or continues the turns that reaped instances — daemons
// whose lease expired — left behind (store.OrphanedWork): the turn
// engine's part of recovery by lease. Each piece is taken over by one
// compare-and-set in the store, so whichever daemons reap at once, it is
// taken over exactly once:
//   - a turn whose confirmed proposal executed on the dead daemon is
//     adopted with that proposal, in one transaction (the dead daemon can
//     never execute it after that), and an owner here records the
//     proposal's outcome from its marker (takeOver): executed — its
//     result read back from what the command wrote — or not executed,
//     which changed nothing. The turn then goes on here, the model seeing
//     that outcome, as it would have on the dead daemon;
//   - a running turn is adopted too: it goes on here when a confirmed
//     proposal of it was decided already (its confirm was answered, and
//     the turn's end must agree with that answer), else it ends with
//     error(service_restarted) and done(failed);
//   - a queued turn goes back to the shared queue, for any daemon with a
//     free worker to claim;
//   - a proposal left executing whose turn is not the dead daemon's is
//     taken and recorded from its marker the same way, without frames.
//
// Turns parked on a human belong to no process and are left alone: any
// daemon continues them when the decision comes. Proposals left
// indeterminate by earlier releases whose marker says they executed are
// recorded as executed (reconcileMarked).
func (c *Coordinator) ReapOrphans(ctx context.Context, w store.OrphanedWork) error {
	// A reaper that was itself reaped (paused, then resumed) or cannot
	// prove its lease takes nothing over: the takeovers must commit while
	// it is live.
	ctx = c.holding(ctx)
	var errs []error
	errs = append(errs, c.recheckTakeovers(ctx))
	for i, t := range w.Turns {
		if err := ctx.Err(); err != nil {
			// The look's time is up: the turns not taken are still
			// orphaned, and the next look lists them again.
			return errors.Join(append(errs, fmt.Errorf("%d of %d orphaned turns left for the next look: %w", len(w.Turns)-i, len(w.Turns), err))...)
		}
		errs = append(errs, c.reapTurn(ctx, t))
	}
	for _, p := range w.Proposals {
		errs = append(errs, c.reapProposal(ctx, p))
	}
	if c.cfg.Shared {
		errs = append(errs, c.reconcileMarked(ctx))
	}
	return errors.Join(errs...)
}

// takeover is what an owner of a turn taken over from a dead daemon does
// first (takenOver).
type takeover struct {
	proposals []string        // the proposals the dead daemon left executing, now this daemon's
	resume    bool            // a decided proposal's turn: it goes on here
	err       *protocol.Error // how the turn ends when it does not go on
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
	tk := takeover{err: protocol.Errorf(protocol.ServiceRestarted,
		"the daemon running this turn stopped (its lease expired); the turn did not complete").With("instance", t.Owner)}
	if t.Owner != "" {
		ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: t.RequestID, Limit: 1000})
		if err != nil {
			return err
		}
		for _, p := range ps {
			switch {
			case p.Status == store.ProposalExecuting && p.Owner == t.Owner:
				tk.proposals = append(tk.proposals, p.ID)
			case p.Status == store.ProposalSucceeded || p.Status == store.ProposalFailed:
				tk.resume = true
			}
		}
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed {
		return nil // a daemon that stays takes it over
	}
	adopted, err := c.store.AdoptTurn(ctx, store.AdoptTurnParams{RequestID: t.RequestID, From: t.Owner, To: c.cfg.Instance,
		Proposals: tk.proposals})
	if err != nil && store.Transient(err) {
		// The takeover may have committed although its answer was lost:
		// read the turn again, now and at the next looks, never forget it
		// (an adopted turn is no longer orphaned work for anyone). Not
		// landed yet is not never: a commit whose caller gave up may
		// still be running in the database (PostgreSQL finishes it after
		// the connection was dropped).
		c.rememberTakeover(t)
		var landed bool
		if adopted, landed, err = c.tookOver(ctx, t); err != nil || !landed {
			return err
		}
	} else if err != nil {
		return ignoreConflict(err) // another reaper took it, or a late commit of ours did: recheckTakeovers reads which
	}
	c.forgetTakeover(t.RequestID) // this takeover settles any earlier one
	c.endAdopted(adopted, t.Owner, tk)
	return nil
}

// endAdopted starts (or tells) the owner that continues or ends a turn
// taken over from a dead daemon.
func (c *Coordinator) endAdopted(adopted store.Turn, from string, tk takeover) {
	t := adopted
	c.log.Warn("taking over a turn whose daemon stopped", "request", t.RequestID, "conversation", t.ConversationID, "instance", from,
		"executing_proposals", len(tk.proposals))
	c.mu.Lock()
	parked := c.owners[t.RequestID]
	c.mu.Unlock()
	if parked != nil {
		// A parked owner here while its proposal executed on the dead
		// daemon: it takes the turn over.
		parked.box.put(reapRequest{takeover: tk})
		return
	}
	started := false
	o := c.startOwnerWith(adopted, phaseReaped, nil, func(o *owner) { o.takeover, started = &tk, true })
	if !started { // an owner started meanwhile (a decision adopted it)
		o.box.put(reapRequest{takeover: tk})
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

// stillOrphaned says a turn is as the reaper saw it before its takeover:
// the takeover did not land, or not yet.
func stillOrphaned(cur, seen store.Turn) bool {
	return cur.Owner == seen.Owner && cur.Epoch == seen.Epoch && !cur.Status.Terminal()
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

// forgetTakeover drops a remembered takeover: it was settled.
func (c *Coordinator) forgetTakeover(requestID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.unsure, requestID)
}

// recheckTakeovers reads again the takeovers whose outcome was unknown and
// takes over the turns that turn out to be this daemon's. One still
// orphaned is kept (its commit may yet land) until a takeover of it
// settles: this daemon's next (reapTurn), or another daemon's.
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
		if !landed {
			if !stillOrphaned(cur, t) {
				c.forgetTakeover(t.RequestID) // ended, or taken by another daemon
			}
			continue
		}
		tk := takeover{err: protocol.Errorf(protocol.ServiceRestarted,
			"the daemon running this turn stopped (its lease expired); the turn did not complete").With("instance", t.Owner)}
		ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: t.RequestID, Limit: 1000})
		if err != nil {
			errs = append(errs, err) // kept: the next look reads it all again
			continue
		}
		c.forgetTakeover(t.RequestID)
		for _, p := range ps {
			switch {
			case p.Status == store.ProposalExecuting && p.Owner == c.cfg.Instance:
				tk.proposals = append(tk.proposals, p.ID)
			case p.Status == store.ProposalSucceeded || p.Status == store.ProposalFailed:
				tk.resume = true
			}
		}
		c.life.RLock()
		if !c.closed {
			c.endAdopted(cur, t.Owner, tk)
		}
		c.life.RUnlock()
	}
	return errors.Join(errs...)
}

// reapProposal takes a proposal that a dead daemon left executing, once,
// and records its outcome from its marker; its turn runs on, or ended,
// elsewhere, so no frames.
func (c *Coordinator) reapProposal(ctx context.Context, p store.Proposal) error {
	taken, err := c.store.DisownProposal(ctx, store.DisownProposalParams{ID: p.ID, From: p.Owner, To: c.cfg.Instance})
	if err != nil {
		return ignoreConflict(err)
	}
	_, err = c.settleTakenOver(ctx, taken, false)
	return err // not recorded: it is this daemon's, executing, and reconcileMarked or the next start records it
}

// reconcileMarked records the proposals left indeterminate (executing, no
// owner: by an earlier release's takeover) whose marker says they
// executed: their result is read back, and their audit row says executed.
// Those without the marker stay for reconcile_proposal: an execution from
// before the marker existed would not show.
func (c *Coordinator) reconcileMarked(ctx context.Context) error {
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{Statuses: []store.ProposalStatus{store.ProposalExecuting}, Limit: 100})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range ps {
		mine := p.Owner == c.cfg.Instance && c.ownerOf(p.RequestID) == nil // a takeover whose recording failed
		if !mine && (p.Owner != "" || p.ExecutedAt == nil) {
			continue
		}
		if !mine {
			if p, err = c.store.DisownProposal(ctx, store.DisownProposalParams{ID: p.ID, From: "", To: c.cfg.Instance}); err != nil {
				errs = append(errs, ignoreConflict(err))
				continue
			}
		}
		t, err := c.store.GetTurn(ctx, p.RequestID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := c.settleTakenOver(ctx, p, false); err != nil {
			errs = append(errs, err)
			continue
		}
		if !mine {
			c.log.Warn("recorded an indeterminate proposal as executed: its execution marker says it ran", "proposal", p.ID,
				"command", p.CommandType, "turn_status", t.Status)
		}
	}
	return errors.Join(errs...)
}

// ownerOf is the owner of a turn in this process, if any.
func (c *Coordinator) ownerOf(requestID string) *owner {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owners[requestID]
}

// notExecuted is the stored error code of a taken-over proposal whose
// command never ran (proposals.go's storedResult says so).
const notExecuted = "not_executed"

// settleTakenOver records the outcome of a proposal this daemon took over
// from a dead one (it is this daemon's, executing, at the takeover's
// epoch): the marker the command's own transaction sets says whether it
// ran. Ran: succeeded, with its result read back (readBack). Not: failed,
// not executed — nothing changed, and the fence keeps the dead daemon
// from ever running it. frames: its turn is this daemon's and active.
func (c *Coordinator) settleTakenOver(ctx context.Context, p store.Proposal, frames bool) (finished, error) {
	fp := finishParams{proposal: p, frames: frames}
	if p.ExecutedAt != nil {
		fp.result = c.readBack(ctx, p)
	} else {
		code := notExecuted
		fp.code = &code
		fp.failure = notExecutedError(p.ID)
	}
	fin, err := c.finishProposal(c.executing(ctx, p, false), fp)
	if err == nil {
		c.log.Warn("recorded the outcome of a proposal taken over from a stopped daemon", "proposal", p.ID, "command", p.CommandType,
			"executed", p.ExecutedAt != nil)
	}
	return fin, err
}

// notExecutedError is the outcome of a taken-over proposal that never ran.
func notExecutedError(id string) *protocol.Error {
	return protocol.Errorf(protocol.ServiceRestarted,
		"the command was not executed: the daemon that confirmed it stopped (its lease expired) before the command ran; nothing was changed, and it will not run; propose it again").
		With("proposalId", id).With("executed", false)
}

// ignoreConflict drops a conflict: another daemon took the work first.
func ignoreConflict(err error) error {
	if protocol.IsCode(err, protocol.Conflict) {
		return nil
	}
	return err
}

// indeterminateRow is the audit row of a proposal whose outcome is unknown.
func (c *Coordinator) indeterminateRow(p store.Proposal) *store.AppendAdminEventParams {
	now := c.now()
	done := p
	done.CompletedAt = &now
	row := auditRow(done, auditParams{decision: protocol.DecisionIndeterminate, now: now})
	return &row
}

// indeterminateDone reports an indeterminate proposal.
func (c *Coordinator) indeterminateDone(p store.Proposal) {
	c.obs.ProposalDecided(decidedOf(p, protocol.DecisionIndeterminate))
	c.log.Warn("proposal outcome is indeterminate (its daemon stopped while executing it); reconcile it",
		"proposal", p.ID, "command", p.CommandType, "instance", p.Owner)
}
