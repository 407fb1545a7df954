package coordinator

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The owner of a turn: its state, how it is started (startOwner) or found
// (ownerFor), its run loop over steps (steps.go, parked.go, ending.go), and
// how it retires. Everything that changes the turn runs on this goroutine.

// owner is the one goroutine that changes its turn (see the package
// comment). Only run and what it calls touch the fields below box.
type owner struct {
	c   *Coordinator
	box mailbox
	// retired closes when the owner gave its turn up (its watcher stops).
	retired chan struct{}

	ctx       context.Context // cancelled when the shutdown grace ends
	cancelCtx context.CancelCauseFunc
	turn      store.Turn
	phase     phase
	slot      *ticket
	since     time.Time
	frames    int
	app       *appender // the turn's frames on their way to the store (appender.go)

	cancelWanted  bool
	cancelBy      string // who asked first ("" for none): the decider of a proposal the cancel closes
	cancelWaiters []chan protocol.Turn
	model         *Model         // the model the turn talks to, chosen at its first round
	rounds        int            // model rounds so far, across decisions
	modelSpent    time.Duration  // model time so far: attempts and retry waits (ModelBudget)
	proposals     int            // proposals made so far
	effects       int            // cockpit effects emitted so far (this process's part of the turn)
	executing     string         // the proposal whose command is executing
	indeterminate *indeterminate // an indeterminate audit row still owed

	prog   progress // what the turn is doing now, for readers (progress.go)
	convID string   // the turn's conversation: read by other goroutines, never written after start
	// takeover is what to do first with a turn taken over from a dead
	// daemon (parked.go's takenOver).
	takeover *takeover
	// moved says a recheck found the queued turn claimed or ended by
	// another daemon: its owner steps aside.
	moved bool
	// fenced says a write was refused because the turn is no longer this
	// daemon's (durable.go): the owner stops without writing.
	fenced bool
	// onLapse answers the decision being applied when the lease can no
	// longer be proven (durable.go's answerOnLapse).
	onLapse func()
}

// step is one stretch of an owner's life; it returns the next (nil: done).
type step func() step

// phase is where an owner is in its turn's life.
type phase int

const (
	phaseQueued    phase = iota // accepted, waiting for a worker
	phaseRunning                // talking to the model, running tools
	phaseParked                 // waiting for a human's decision; holds no worker
	phaseResuming               // decided, waiting for a worker to continue
	phaseExecuting              // a confirmed command is executing
	phaseEnding                 // writing its end
	phaseReaped                 // taken over from a dead daemon: its proposals recorded, then on or ended
)

// ownerFor finds the turn's owner, or adopts one for a turn parked on a
// human (after a restart, or parked by another daemon). It returns nil for a
// turn queued or running in another daemon.
func (c *Coordinator) ownerFor(t store.Turn) (*owner, error) {
	c.life.RLock()
	defer c.life.RUnlock()
	c.mu.Lock()
	o := c.owners[t.RequestID]
	c.mu.Unlock()
	if o != nil {
		return o, nil
	}
	if c.closed {
		return nil, shuttingDown()
	}
	if t.Status != store.TurnAwaitingConfirmation && t.Status != store.TurnRunning {
		return nil, nil
	}
	// Adopt: parked here, the owner decides with the store's compare-and-
	// set transitions; if the turn turns out to run elsewhere it steps aside.
	return c.startOwner(t, phaseParked, nil), nil
}

// startOwner registers and starts the owner of a turn (or returns the one
// that won a race to adopt it). The caller holds c.life shared.
func (c *Coordinator) startOwner(t store.Turn, from phase, slot *ticket) *owner {
	return c.startOwnerWith(t, from, slot, nil)
}

// startOwnerWith is startOwner; set prepares a new owner before it runs.
func (c *Coordinator) startOwnerWith(t store.Turn, from phase, slot *ticket, set func(*owner)) *owner {
	c.mu.Lock()
	if o := c.owners[t.RequestID]; o != nil {
		c.mu.Unlock()
		c.pool.done(slot)
		return o
	}
	ctx, cancel := context.WithCancelCause(c.base)
	o := &owner{c: c, turn: t, convID: t.ConversationID, ctx: ctx, cancelCtx: cancel, slot: slot, phase: from, since: time.Now(),
		box: mailbox{sig: make(chan struct{}, 1)}, retired: make(chan struct{})}
	o.app = o.newAppender()
	if set != nil {
		set(o)
	}
	c.owners[t.RequestID] = o
	c.wg.Add(1)
	if c.cfg.Shared {
		c.wg.Add(1)
		go o.watch(t.RequestID)
	}
	c.mu.Unlock()
	if from == phaseQueued {
		o.report(protocol.ProgressQueued, nil)
	}
	go o.run()
	return o
}

func (o *owner) run() {
	defer o.c.wg.Done()
	defer o.cancelCtx(nil)
	var next step
	switch o.phase {
	case phaseQueued:
		next = o.queued
	case phaseRunning: // claimed from the queue of another daemon
		next = o.converse
	case phaseReaped:
		next = o.takenOver
	default:
		next = o.adopted
	}
	for next != nil {
		next = next()
	}
	o.app.wait() // an owner that stopped without settling (lost) leaves no append behind
	o.retire()
}

// retire gives the turn up: no request reaches this owner any more, and
// those still in its mailbox are answered from the store.
func (o *owner) retire() {
	close(o.retired)
	o.c.pool.done(o.slot)
	o.c.mu.Lock()
	if o.c.owners[o.turn.RequestID] == o {
		delete(o.c.owners, o.turn.RequestID)
	}
	o.c.mu.Unlock()
	o.c.progressed.Notify(o.turn.ConversationID) // no active turn here any more
	for _, r := range o.box.drain() {
		o.answerLate(r)
	}
}

func shuttingDown() *protocol.Error {
	return &protocol.Error{Code: protocol.ServiceFailure, Retryable: true, Message: "the daemon is shutting down"}
}

// answerLate answers a request the turn no longer needs: its end or its
// step aside came first.
func (o *owner) answerLate(r request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), 10*time.Second)
	defer cancel()
	switch r := r.(type) {
	case cancelRequest:
		// Recorded: whoever owns the turn next (after a restart, or in
		// another daemon) ends it cancelled.
		t, _, err := o.c.store.RequestCancel(ctx, store.RequestCancelParams{RequestID: o.turn.RequestID, By: r.by, Now: o.c.now()})
		if err != nil {
			r.reply <- o.view(ctx)
			return
		}
		r.reply <- turnView(t)
	case decisionRequest:
		p, err := o.c.store.GetProposal(ctx, r.proposalID)
		if err != nil {
			r.answer(protocol.ProposalResult{}, err)
			return
		}
		if p.Status == store.ProposalPending {
			r.answer(protocol.ProposalResult{}, shuttingDown())
			return
		}
		r.answer(notPendingAnswer(r.kind, p))
	}
}
