package coordinator

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	redactpkg "github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
)

// The public face of turns: submission and cancellation. Both hand the
// turn to its owner (owner.go) through its mailbox (mailbox.go).

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
	return c.submit(ctx, convID, "", req, contextRecord{Snapshot: req.Context, Client: req.Client})
}

// SubmitTurnAs is SubmitTurn with the turn's request id chosen by the door
// (a UUID): a door whose clients name their runs (AG-UI) finds the turn
// again by that name. A request id already taken is conflict.
func (c *Coordinator) SubmitTurnAs(ctx context.Context, convID, requestID string, req protocol.TurnRequest) (protocol.TurnAccepted, error) {
	if _, err := uuid.Parse(requestID); err != nil {
		return protocol.TurnAccepted{}, protocol.Errorf(protocol.Validation, "request id %q is not a UUID", requestID)
	}
	if err := req.Validate(); err != nil {
		return protocol.TurnAccepted{}, err
	}
	if _, err := c.conversation(ctx, convID); err != nil {
		return protocol.TurnAccepted{}, err
	}
	if _, err := c.store.GetTurn(ctx, requestID); err == nil {
		return protocol.TurnAccepted{}, protocol.Errorf(protocol.Conflict, "request %s exists already", requestID).With("requestId", requestID)
	} else if !protocol.IsCode(err, protocol.NotFound) {
		return protocol.TurnAccepted{}, err
	}
	return c.submit(ctx, convID, requestID, req, contextRecord{Snapshot: req.Context, Client: req.Client})
}

// Turn is one turn of a conversation: not_found when the conversation has
// no such request.
func (c *Coordinator) Turn(ctx context.Context, convID, requestID string) (protocol.Turn, error) {
	t, err := ofConversation(ctx, c, convID, "request", requestID, c.store.GetTurn, func(t store.Turn) string { return t.ConversationID })
	if err != nil {
		return protocol.Turn{}, err
	}
	return turnView(t), nil
}

// submit durably accepts a validated turn whose context record is rec and
// hands it to its owner (SubmitTurn, and an agent's command: agents.go);
// requestID "" gets a new one.
func (c *Coordinator) submit(ctx context.Context, convID, requestID string, req protocol.TurnRequest, rec contextRecord) (protocol.TurnAccepted, error) {
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
	if req.WhenBusy == protocol.WhenBusyInterrupt {
		if err := c.mayInterrupt(ctx, convID); err != nil {
			return protocol.TurnAccepted{}, err
		}
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed {
		return protocol.TurnAccepted{}, shuttingDown()
	}
	// A submission that may wait needs no worker to be accepted: without a
	// free place in the queue it is stored owned by no daemon, and the first
	// with a free worker claims it once it is the active turn.
	slot, ok := c.pool.admit()
	if !ok && !req.WhenBusy.Waits() {
		return protocol.TurnAccepted{}, &protocol.Error{Code: protocol.RateLimited, Retryable: true,
			RetryAfterMs: c.cfg.QueueRetryAfter.Milliseconds(),
			Message:      "too many turns are waiting for the model; try again shortly",
			Details:      map[string]any{"queuedTurns": c.pool.depth()}}
	}
	instance := c.cfg.Instance
	if slot == nil {
		instance = ""
	}
	if requestID == "" {
		requestID = uuid.NewString()
	}
	now := c.now()
	// A secret the person pasted is kept neither in the frame, the search
	// index nor the model's context.
	req.Instruction = redactpkg.Secrets(req.Instruction)
	details := map[string]any{"conversationId": convID, "requestId": requestID,
		"contextHash": hash, "instructionChars": len([]rune(req.Instruction))}
	if req.WhenBusy != "" {
		details["whenBusy"] = string(req.WhenBusy)
	}
	turn, frame, err := c.store.SubmitTurn(ctx, store.SubmitTurnParams{
		ConversationID: convID, RequestID: requestID, Instruction: req.Instruction,
		ContextJSON: record, ContextHash: hash, ExpectedLastSequence: *req.ExpectedLastSequence, Now: now,
		Instance: instance, SubmittedBy: principalName(ctx), WhenBusy: req.WhenBusy,
		Audit: personAudit(ctx, TurnSubmittedAction, requestID, details, now),
	})
	if err != nil {
		c.pool.done(slot)
		return protocol.TurnAccepted{}, err
	}
	if turn.Waiting() {
		c.pool.done(slot)
		return c.acceptedWaiting(ctx, turn), nil
	}
	if slot == nil {
		// Active at once, owned by no daemon: the claims run it.
		c.announceQueued(ctx)
		return protocol.TurnAccepted{ConversationID: convID, RequestID: turn.RequestID, AcceptedSequence: frame.Sequence}, nil
	}
	c.obs.TurnAccepted(TurnAccepted{ConversationID: convID, RequestID: turn.RequestID, Position: c.pool.position(slot)})
	c.startOwner(turn, phaseQueued, slot)
	c.announceWaiting(ctx, slot)
	return protocol.TurnAccepted{ConversationID: convID, RequestID: turn.RequestID, AcceptedSequence: frame.Sequence}, nil
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
	defer c.lineMoved(convID)
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
		t, _, err := c.store.RequestCancel(ctx, store.RequestCancelParams{RequestID: requestID, By: principalName(ctx), Now: c.now()})
		return turnView(t), err
	}
	o.box.put(cancelRequest{reply: reply, by: principalName(ctx)})
	select {
	case v := <-reply:
		return v, nil
	case <-ctx.Done():
		return protocol.Turn{}, ctx.Err()
	}
}

// accepted answers a submission that waits behind the active turn; an
// interrupt cancels the active turn the usual way (its proposal with it),
// after which its end makes the waiting turn active. The cancel is already
// recorded in the store, so a daemon that stops before it is delivered
// leaves it for the turn's next owner (parked.go, Recover).
func (c *Coordinator) acceptedWaiting(ctx context.Context, t store.Turn) protocol.TurnAccepted {
	c.lineMoved(t.ConversationID)
	line := c.waitingLine(ctx, t.ConversationID, true)
	acc := protocol.TurnAccepted{ConversationID: t.ConversationID, RequestID: t.RequestID, Interrupted: t.Interrupts}
	for _, w := range line {
		if w.RequestID == t.RequestID {
			acc.Waiting = w.Position
		}
	}
	if acc.Waiting == 0 {
		acc.Waiting = 1 // it left the line meanwhile: it is the active turn now, or next
	}
	if t.Interrupts != "" {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.RemoteCancelWait+10*time.Second)
		defer cancel()
		if _, err := c.CancelTurn(cctx, t.ConversationID, t.Interrupts); err != nil {
			c.log.Warn("interrupt: cancel the active turn", "conversation", t.ConversationID, "request", t.Interrupts, "err", err)
		}
	}
	return acc
}
