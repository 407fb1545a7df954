package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/app"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// contextRecord is what a turn's context_json holds: the snapshot the
// operator submitted and, once compiled, the model context receipt.
type contextRecord struct {
	Snapshot protocol.ContextSnapshot `json:"snapshot"`
	Receipt  *receipt                 `json:"receipt,omitempty"`
	// Agent, set for a turn an outside agent submitted (agents.go), is the
	// one command tool call the turn makes instead of asking a model.
	Agent *agentCall `json:"agent,omitempty"`
}

// SubmitTurn validates and durably accepts a turn, then hands it to its
// owner. When MaxQueuedTurns new turns already wait for a worker it is
// refused with rate_limited and nothing is created.
func (c *Coordinator) SubmitTurn(ctx context.Context, convID string, req protocol.TurnRequest) (protocol.TurnAccepted, error) {
	if err := req.Validate(); err != nil {
		return protocol.TurnAccepted{}, err
	}
	if _, err := c.conversation(ctx, convID); err != nil {
		return protocol.TurnAccepted{}, err
	}
	return c.submit(ctx, convID, req, contextRecord{Snapshot: req.Context})
}

// submit durably accepts a validated turn whose context record is rec and
// hands it to its owner (SubmitTurn, and an agent's command: agents.go).
func (c *Coordinator) submit(ctx context.Context, convID string, req protocol.TurnRequest, rec contextRecord) (protocol.TurnAccepted, error) {
	record, err := protocol.Marshal(rec)
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	snap, err := protocol.Marshal(req.Context)
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	hash, err := protocol.CommandHash(snap)
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed {
		return protocol.TurnAccepted{}, shuttingDown()
	}
	slot, ok := c.pool.admit()
	if !ok {
		return protocol.TurnAccepted{}, &protocol.Error{Code: protocol.RateLimited, Retryable: true,
			RetryAfterMs: c.cfg.QueueRetryAfter.Milliseconds(),
			Message:      "too many turns are waiting for the model; try again shortly",
			Details:      map[string]any{"queuedTurns": c.pool.depth()}}
	}
	requestID, now := uuid.NewString(), c.now()
	turn, frame, err := c.store.SubmitTurn(ctx, store.SubmitTurnParams{
		ConversationID: convID, RequestID: requestID, Instruction: req.Instruction,
		ContextJSON: record, ContextHash: hash, ExpectedLastSequence: *req.ExpectedLastSequence, Now: now,
		Instance: c.cfg.Instance, SubmittedBy: principalName(ctx),
		Audit: personAudit(ctx, TurnSubmittedAction, requestID, map[string]any{"conversationId": convID, "requestId": requestID,
			"contextHash": hash, "instructionChars": len([]rune(req.Instruction))}, now),
	})
	if err != nil {
		c.pool.done(slot)
		return protocol.TurnAccepted{}, err
	}
	c.obs.TurnAccepted(TurnAccepted{ConversationID: convID, RequestID: turn.RequestID, Position: c.pool.position(slot)})
	c.startOwner(turn, phaseQueued, slot)
	c.announceWaiting(ctx, slot)
	return protocol.TurnAccepted{ConversationID: convID, RequestID: turn.RequestID, AcceptedSequence: frame.Sequence}, nil
}

func shuttingDown() *protocol.Error {
	return &protocol.Error{Code: protocol.ServiceFailure, Retryable: true, Message: "the daemon is shutting down"}
}

// CancelTurn asks for a turn's cancellation; it is idempotent and answers
// the turn's state once its owner took the request in: cancelled for a
// queued, waiting or parked turn; running with cancelRequestedAt while a
// confirmed command finishes executing (the turn ends cancelled right
// after its result is recorded).
func (c *Coordinator) CancelTurn(ctx context.Context, convID, requestID string) (protocol.Turn, error) {
	t, err := ofConversation(ctx, c, convID, "request", requestID, c.store.GetTurn, func(t store.Turn) string { return t.ConversationID })
	if err != nil {
		return protocol.Turn{}, err
	}
	if t.Status.Terminal() {
		return turnView(t), nil
	}
	if c.elsewhere(t) {
		return c.cancelElsewhere(ctx, t)
	}
	reply := make(chan protocol.Turn, 1)
	o, err := c.ownerFor(t)
	if err != nil {
		return protocol.Turn{}, err
	}
	if o == nil {
		// A queued turn with no owner here: the store cancels it at once
		// (or records the cancel for whoever claimed it meanwhile, whom
		// the record notifies).
		t, _, err := c.store.RequestCancel(ctx, store.RequestCancelParams{RequestID: requestID, Now: c.now()})
		return turnView(t), err
	}
	o.box.put(cancelRequest{reply: reply})
	select {
	case v := <-reply:
		return v, nil
	case <-ctx.Done():
		return protocol.Turn{}, ctx.Err()
	}
}

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

// phase is where an owner is in its turn's life.
type phase int

const (
	phaseQueued    phase = iota // accepted, waiting for a worker
	phaseRunning                // talking to the model, running tools
	phaseParked                 // waiting for a human's decision; holds no worker
	phaseResuming               // decided, waiting for a worker to continue
	phaseExecuting              // a confirmed command is executing
	phaseEnding                 // writing its end
	phaseReaped                 // taken over from a dead daemon: to end at once
)

// A request in an owner's mailbox.
type request interface{ isRequest() }

// cancelRequest asks the owner to cancel the turn; reply receives the turn
// once the owner took the request in.
type cancelRequest struct{ reply chan protocol.Turn }

// decisionKind is what a human (or the clock) decided about a proposal.
type decisionKind int

const (
	decideConfirm decisionKind = iota + 1
	decideDeny
	decideExpire
	decideAmend
)

// decisionRequest asks the owner to apply a decision to one of the turn's
// proposals; reply (buffered, may be nil) receives the answer.
type decisionRequest struct {
	kind       decisionKind
	proposalID string
	amended    app.Command // decideAmend: the operator's edited command
	by         string      // the deciding principal's name ("" for none)
	reply      chan decisionReply
}

type decisionReply struct {
	result  protocol.ProposalResult
	amended *store.Proposal // decideAmend: the new proposal
	err     error
}

// recheckRequest asks the owner to read its turn again: another daemon
// recorded a cancel, or claimed the turn (claims.go).
type recheckRequest struct{}

// reapRequest asks a parked owner to end its turn: the daemon that
// executed its proposal died (reaper.go).
type reapRequest struct{ err *protocol.Error }

func (cancelRequest) isRequest()   {}
func (decisionRequest) isRequest() {}
func (recheckRequest) isRequest()  {}
func (reapRequest) isRequest()     {}

func (r decisionRequest) answer(res protocol.ProposalResult, err error) {
	if r.reply != nil {
		r.reply <- decisionReply{result: res, err: err}
	}
}

// mailbox is an owner's queue of requests, in arrival order. Senders never
// block; sig wakes the owner.
type mailbox struct {
	mu  sync.Mutex
	q   []request
	sig chan struct{}
}

func (b *mailbox) put(r request) {
	b.mu.Lock()
	b.q = append(b.q, r)
	b.mu.Unlock()
	select {
	case b.sig <- struct{}{}:
	default:
	}
}

// putOnce puts r unless a request like it (same) is queued already.
func (b *mailbox) putOnce(r request, same func(request) bool) {
	b.mu.Lock()
	for _, q := range b.q {
		if same(q) {
			b.mu.Unlock()
			return
		}
	}
	b.mu.Unlock()
	b.put(r)
}

// take removes and returns the first request keep accepts, or nil.
func (b *mailbox) take(keep func(request) bool) request {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, r := range b.q {
		if keep(r) {
			b.q = append(b.q[:i], b.q[i+1:]...)
			return r
		}
	}
	return nil
}

func (b *mailbox) drain() []request {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.q
	b.q = nil
	return q
}

func isCancel(r request) bool  { _, ok := r.(cancelRequest); return ok }
func isRecheck(r request) bool { _, ok := r.(recheckRequest); return ok }
func anyRequest(request) bool  { return true }

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
	reaped *protocol.Error
	// moved says a recheck found the queued turn claimed or ended by
	// another daemon: its owner steps aside.
	moved bool
	// fenced says a write was refused because the turn is no longer this
	// daemon's (durable.go): the owner stops without writing.
	fenced bool
}

// step is one stretch of an owner's life; it returns the next (nil: done).
type step func() step

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
		next = o.ending(store.TurnFailed, o.reaped)
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

// answerLate answers a request the turn no longer needs: its end or its
// step aside came first.
func (o *owner) answerLate(r request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), 10*time.Second)
	defer cancel()
	switch r := r.(type) {
	case cancelRequest:
		// Recorded: whoever owns the turn next (after a restart, or in
		// another daemon) ends it cancelled.
		t, _, err := o.c.store.RequestCancel(ctx, store.RequestCancelParams{RequestID: o.turn.RequestID, Now: o.c.now()})
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
		r.answer(settledAnswer(r.kind, p))
	}
}

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
		if !o.cancelWanted {
			o.cancelWanted = true
			if o.phase == phaseExecuting || o.phase == phaseRunning {
				// Durable, so the stored turn says so; best effort: the
				// owner honours the request whatever the store says.
				_, _, _ = o.c.store.RequestCancel(o.ctx, store.RequestCancelParams{RequestID: o.turn.RequestID, Now: o.c.now()})
			}
		}
		reply := r.(cancelRequest).reply
		if now {
			reply <- o.view(o.ctx)
		} else {
			o.cancelWaiters = append(o.cancelWaiters, reply)
		}
	}
}

// queued waits for the worker of a new turn.
func (o *owner) queued() step { return o.waiting }

// resuming waits for a worker to continue after a decision.
func (o *owner) resuming() step {
	o.phase = phaseResuming
	o.slot = o.c.pool.resume()
	o.report(protocol.ProgressQueued, nil)
	return o.waiting
}

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

// isStopping reports whether Shutdown has begun.
func (c *Coordinator) isStopping() bool {
	select {
	case <-c.stopping:
		return true
	default:
		return false
	}
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
