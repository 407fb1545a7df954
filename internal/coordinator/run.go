package coordinator

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// run executes one turn on a worker slot: it starts it (or, for a
// continuation after a proposal decision, finds it running already), talks
// to the model, and ends it exactly once — unless it parks the turn to wait
// for a human, in which case the decision continues it.
func (c *Coordinator) run(ctx context.Context, t store.Turn, continuation bool) {
	if !continuation {
		started, err := c.store.StartTurn(ctx, store.StartTurnParams{RequestID: t.RequestID, Now: c.now()})
		if err != nil {
			if !protocol.IsCode(err, protocol.Conflict) { // conflict: cancelled while queued
				c.log.Error("start turn", "request", t.RequestID, "err", err)
				c.finish(t.RequestID, store.TurnFailed, protocol.Errorf(protocol.ServiceFailure, "the turn could not start"))
			}
			return
		}
		t = started
	} else if cur, err := c.store.GetTurn(ctx, t.RequestID); err == nil {
		t = cur
	}
	if t.CancelRequestedAt != nil {
		c.endTurn(t, store.TurnCancelled, nil)
		return
	}
	status, perr, parked := c.converse(ctx, t)
	if parked {
		return
	}
	if ctx.Err() != nil {
		status, perr = c.interrupted(ctx)
		if status == store.TurnCancelled && c.waitForExecution(t) {
			return // the command's result continues the turn, which then ends cancelled
		}
	}
	c.endTurn(t, status, perr)
}

// waitForExecution parks a cancelled turn whose confirmed command is still
// executing: a turn cannot end before that result is recorded. Pending
// proposals are cancelled first.
func (c *Coordinator) waitForExecution(t store.Turn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.closeTurnProposals(ctx, t.RequestID)
	parked, err := c.store.AwaitConfirmation(ctx, store.AwaitConfirmationParams{RequestID: t.RequestID})
	if err != nil {
		c.log.Error("park cancelled turn", "request", t.RequestID, "err", err)
	}
	return parked
}

// interrupted tells a cancelled turn from one the shutdown ended.
func (c *Coordinator) interrupted(ctx context.Context) (store.TurnStatus, *protocol.Error) {
	if errors.Is(context.Cause(ctx), errCancelRequested) {
		return store.TurnCancelled, nil
	}
	return store.TurnFailed, restartedError()
}

// converse runs the model loop: compile the context from the stored frames,
// stream, run tool calls, and go again, until the model stops calling tools,
// a proposal parks the turn, or the round budget is spent.
func (c *Coordinator) converse(ctx context.Context, t store.Turn) (status store.TurnStatus, perr *protocol.Error, parked bool) {
	for round := 0; round < c.cfg.MaxToolRounds; round++ {
		req, err := c.compile(ctx, t)
		if err != nil {
			if ctx.Err() != nil {
				return store.TurnFailed, nil, false
			}
			return store.TurnFailed, serviceError(c, "compile context", err), false
		}
		calls, perr := c.streamWithRetry(ctx, t, req)
		if perr != nil || ctx.Err() != nil {
			return store.TurnFailed, perr, false
		}
		if len(calls) == 0 {
			return store.TurnCompleted, nil, false
		}
		proposed := false
		for i := range calls {
			if calls[i].ID == "" { // the call id pairs a tool_call with its tool_result
				calls[i].ID = "call_" + uuid.NewString()
			}
			pending, perr := c.callTool(ctx, t, calls[i], req.View)
			if perr != nil || ctx.Err() != nil {
				return store.TurnFailed, perr, false
			}
			proposed = proposed || pending
		}
		if proposed {
			ok, err := c.store.AwaitConfirmation(ctx, store.AwaitConfirmationParams{RequestID: t.RequestID})
			if err != nil {
				return store.TurnFailed, serviceError(c, "await confirmation", err), false
			}
			if ok {
				return "", nil, true // the decision continues the turn
			}
			// Decided already (a fast human): go on with the result.
		}
	}
	return store.TurnFailed, protocol.Errorf(protocol.ModelFailure,
		"the model kept calling tools after %d rounds; the turn was stopped", c.cfg.MaxToolRounds), false
}

// compile builds the model request from stored frames: the newest complete
// earlier turns within the D7 budget, then this turn's frames so far (its
// instruction, text, tool calls and results). The receipt of the history
// goes into the turn's context_json once.
func (c *Coordinator) compile(ctx context.Context, t store.Turn) (model.Request, error) {
	var rec contextRecord
	if err := protocol.Unmarshal(t.ContextJSON, &rec); err != nil {
		return model.Request{}, err
	}
	current, err := c.turnFrames(ctx, t)
	if err != nil {
		return model.Request{}, err
	}
	if len(current) == 0 {
		return model.Request{}, fmt.Errorf("turn %s has no frames", t.RequestID)
	}
	history, err := c.loadHistory(ctx, t.ConversationID, current[0].Sequence)
	if err != nil {
		return model.Request{}, err
	}
	picked, receipt := SelectHistory(history, MaxContextFrames, MaxContextBytes)
	if rec.Receipt == nil || *rec.Receipt != receipt {
		rec.Receipt = &receipt
		record, err := protocol.Marshal(rec)
		if err != nil {
			return model.Request{}, err
		}
		if err := c.store.SetTurnContext(ctx, store.SetTurnContextParams{RequestID: t.RequestID, ContextJSON: record, ContextHash: receipt.Hash}); err != nil {
			return model.Request{}, err
		}
		t.ContextJSON = record
	}
	msgs := append(Messages(picked), Messages(current)...)
	snap := rec.Snapshot
	return model.Request{System: SystemPrompt(snap), Messages: msgs, Tools: c.tools.Catalog(), View: &snap}, nil
}

// streamWithRetry streams one model round, retrying with capped backoff
// when the provider says the failure is retryable and the failed attempt
// emitted nothing: no text frame, no tool call, so no proposal either (ADR
// D7: never retry past a confirmed proposal; a round proposes only after its
// stream ended).
func (c *Coordinator) streamWithRetry(ctx context.Context, t store.Turn, req model.Request) ([]model.ToolCall, *protocol.Error) {
	for attempt := 0; ; attempt++ {
		text, calls, perr := c.streamRound(ctx, t, req)
		if perr == nil || ctx.Err() != nil || !perr.Retryable || text != "" || attempt >= c.cfg.ModelRetries ||
			(perr.Code != protocol.ModelFailure && perr.Code != protocol.RateLimited) {
			return calls, perr
		}
		wait := min(c.cfg.RetryBackoff<<attempt, c.cfg.MaxRetryBackoff)
		if hint := time.Duration(perr.RetryAfterMs) * time.Millisecond; hint > wait {
			wait = min(hint, c.cfg.MaxRetryWait)
		}
		c.log.Warn("model call failed; retrying", "request", t.RequestID, "code", perr.Code, "attempt", attempt+1, "wait", wait)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, nil
		case <-timer.C:
		}
	}
}

// turnFrames reads every frame of one turn, in order.
func (c *Coordinator) turnFrames(ctx context.Context, t store.Turn) ([]store.Frame, error) {
	var out []store.Frame
	after := int64(0)
	for {
		page, err := c.store.ListFrames(ctx, store.ListFramesParams{ConversationID: t.ConversationID, RequestID: t.RequestID, AfterSequence: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 500 {
			return out, nil
		}
		after = page[len(page)-1].Sequence
	}
}

// streamRound streams one model answer into text frames and returns the tool
// calls it made. Text deltas are coalesced: a frame at most every TextFlush,
// and pending text is written when the model pauses, not held until it speaks
// again.
func (c *Coordinator) streamRound(ctx context.Context, t store.Turn, req model.Request) (string, []model.ToolCall, *protocol.Error) {
	var calls []model.ToolCall
	var buf, all strings.Builder
	flush := func() *protocol.Error {
		if buf.Len() == 0 {
			return nil
		}
		text := buf.String()
		all.WriteString(text)
		buf.Reset()
		return c.emit(ctx, t, protocol.TextPayload{Content: text, Format: "markdown", Role: protocol.RoleAssistant})
	}
	events, stop := pump(ctx, func(ctx context.Context) iter.Seq2[model.Event, error] {
		return c.cfg.Provider.Stream(ctx, req)
	})
	defer stop()
	var timer *time.Timer
	var timeout <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-timeout:
			timeout = nil
			if perr := flush(); perr != nil {
				return "", nil, perr
			}
			continue
		case item, ok := <-events:
			if !ok {
				if ctx.Err() != nil {
					return "", nil, nil
				}
				perr := flush()
				return all.String(), calls, perr
			}
			if item.err != nil {
				if ctx.Err() != nil {
					return "", nil, nil
				}
				if perr := flush(); perr != nil {
					return "", nil, perr
				}
				return all.String(), nil, modelError(item.err)
			}
			switch item.ev.Kind {
			case model.EventText:
				buf.WriteString(item.ev.Text)
				if buf.Len() >= 8<<10 {
					if perr := flush(); perr != nil {
						return "", nil, perr
					}
				} else if timeout == nil {
					if timer == nil {
						timer = time.NewTimer(c.cfg.TextFlush)
					} else {
						timer.Reset(c.cfg.TextFlush)
					}
					timeout = timer.C
				}
			case model.EventToolCall:
				calls = append(calls, item.ev.ToolCall)
			}
		}
	}
}

type streamItem struct {
	ev  model.Event
	err error
}

// pump runs a provider stream on its own goroutine so the caller can wait on
// the stream and a timer at once. stop ends the goroutine and waits for it.
func pump(ctx context.Context, stream func(context.Context) iter.Seq2[model.Event, error]) (<-chan streamItem, func()) {
	ctx, cancel := context.WithCancel(ctx)
	seq := stream(ctx)
	out := make(chan streamItem)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		for ev, err := range seq {
			select {
			case out <- streamItem{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out, func() {
		cancel()
		for range out {
		}
		<-done
	}
}

// emit appends frames for the turn; a failure ends the turn as service_failure.
func (c *Coordinator) emit(ctx context.Context, t store.Turn, payloads ...protocol.Payload) *protocol.Error {
	frames := make([]store.NewFrame, len(payloads))
	for i, p := range payloads {
		frames[i] = store.NewFrame{Payload: p}
	}
	_, err := c.store.AppendFrames(ctx, store.AppendFramesParams{ConversationID: t.ConversationID, RequestID: t.RequestID, Frames: frames, Now: c.now()})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return serviceError(c, "append frames", err)
	}
	return nil
}

// modelError types whatever a provider returned.
func modelError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return protocol.Errorf(protocol.ModelFailure, "the model provider failed: %v", err)
}

// serviceError logs an internal failure and types it for the client.
func serviceError(c *Coordinator, what string, err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	c.log.Error(what, "err", err)
	return protocol.Errorf(protocol.ServiceFailure, "%s failed", what)
}
