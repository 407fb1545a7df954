package coordinator

import (
	"context"

	"errors"
	"github.com/google/uuid"
	"iter"
	"strings"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// run executes one turn on a worker slot and always ends it exactly once.
func (c *Coordinator) run(ctx context.Context, t store.Turn) {
	started, err := c.store.StartTurn(ctx, store.StartTurnParams{RequestID: t.RequestID, Now: c.now()})
	if err != nil {
		if !protocol.IsCode(err, protocol.Conflict) { // conflict: cancelled while queued
			c.log.Error("start turn", "request", t.RequestID, "err", err)
			c.finish(t.RequestID, store.TurnFailed, protocol.Errorf(protocol.ServiceFailure, "the turn could not start"))
		}
		return
	}
	t = started
	if t.CancelRequestedAt != nil {
		c.finish(t.RequestID, store.TurnCancelled, nil)
		return
	}
	status, perr := c.converse(ctx, t)
	if ctx.Err() != nil {
		status, perr = c.interrupted(ctx)
	}
	c.finish(t.RequestID, status, perr)
}

// interrupted tells a cancelled turn from one the shutdown ended.
func (c *Coordinator) interrupted(ctx context.Context) (store.TurnStatus, *protocol.Error) {
	if errors.Is(context.Cause(ctx), errCancelRequested) {
		return store.TurnCancelled, nil
	}
	return store.TurnFailed, restartedError()
}

// converse runs the model loop: stream, run tool calls, feed results back,
// until the model stops calling tools or the round budget is spent.
func (c *Coordinator) converse(ctx context.Context, t store.Turn) (store.TurnStatus, *protocol.Error) {
	req, err := c.compile(ctx, t)
	if err != nil {
		return store.TurnFailed, serviceError(c, "compile context", err)
	}
	for round := 0; round < c.cfg.MaxToolRounds; round++ {
		text, calls, perr := c.streamRound(ctx, t, req)
		if perr != nil || ctx.Err() != nil {
			return store.TurnFailed, perr
		}
		if len(calls) == 0 {
			return store.TurnCompleted, nil
		}
		for i := range calls {
			if calls[i].ID == "" { // the call id pairs a tool_call with its tool_result
				calls[i].ID = "call_" + uuid.NewString()
			}
		}
		req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Content: text, ToolCalls: calls})
		for _, call := range calls {
			res, perr := c.callTool(ctx, t, call, req.View)
			if perr != nil || ctx.Err() != nil {
				return store.TurnFailed, perr
			}
			req.Messages = append(req.Messages, toolMessage(res))
		}
	}
	return store.TurnFailed, protocol.Errorf(protocol.ModelFailure,
		"the model kept calling tools after %d rounds; the turn was stopped", c.cfg.MaxToolRounds)
}

// compile builds the model request: the newest complete earlier turns within
// the D7 budget, then the current instruction. The receipt goes into the
// turn's context_json.
func (c *Coordinator) compile(ctx context.Context, t store.Turn) (model.Request, error) {
	var rec contextRecord
	if err := protocol.Unmarshal(t.ContextJSON, &rec); err != nil {
		return model.Request{}, err
	}
	first, err := c.firstSequence(ctx, t)
	if err != nil {
		return model.Request{}, err
	}
	history, err := c.loadHistory(ctx, t.ConversationID, first)
	if err != nil {
		return model.Request{}, err
	}
	picked, receipt := SelectHistory(history, MaxContextFrames, MaxContextBytes)
	rec.Receipt = &receipt
	record, err := protocol.Marshal(rec)
	if err != nil {
		return model.Request{}, err
	}
	if err := c.store.SetTurnContext(ctx, store.SetTurnContextParams{RequestID: t.RequestID, ContextJSON: record, ContextHash: receipt.Hash}); err != nil {
		return model.Request{}, err
	}
	msgs := append(Messages(picked), model.Message{Role: model.RoleUser, Content: t.Instruction})
	snap := rec.Snapshot
	return model.Request{System: SystemPrompt(snap), Messages: msgs, Tools: c.tools.Catalog(), View: &snap}, nil
}

// firstSequence is the sequence of the turn's own first frame (the
// instruction): every earlier frame may be history.
func (c *Coordinator) firstSequence(ctx context.Context, t store.Turn) (int64, error) {
	conv, err := c.store.GetConversation(ctx, t.ConversationID)
	if err != nil {
		return 0, err
	}
	after := max(conv.RetainedFrom-1, 0)
	// The instruction is the newest user frame of this request; scan back a
	// window at a time from the tail.
	for tail := conv.LastSequence(); tail > after; tail -= 256 {
		frames, err := c.store.ListFrames(ctx, store.ListFramesParams{ConversationID: t.ConversationID, AfterSequence: max(tail-256, after), Limit: 256})
		if err != nil {
			return 0, err
		}
		for _, f := range frames {
			if f.RequestID == t.RequestID {
				return f.Sequence, nil
			}
		}
	}
	return conv.NextSequence, nil
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
				return "", nil, modelError(item.err)
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
