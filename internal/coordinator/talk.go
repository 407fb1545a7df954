package coordinator

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// talk runs the model loop: compile the context from the stored frames,
// stream, run the tool calls, and go again, until the model stops calling
// tools, a proposal parks the turn, or a limit is reached. Rounds and
// proposals are counted per turn, across decisions (MaxToolRounds,
// MaxProposalsPerTurn).
func (o *owner) talk() outcome {
	c := o.c
	if a := o.agentCall(); a != nil {
		return o.agentTalk(*a)
	}
	for {
		if o.cancelWanted {
			return interrupted
		}
		if o.rounds >= c.cfg.MaxToolRounds {
			return ended(store.TurnFailed, protocol.Errorf(protocol.ModelFailure,
				"the model kept calling tools for %d rounds; the turn was stopped", c.cfg.MaxToolRounds).
				With("limit", "rounds_per_turn").With("max", c.cfg.MaxToolRounds))
		}
		// A cancel recorded by another daemon is honoured between rounds.
		if t, err := c.store.GetTurn(o.ctx, o.turn.RequestID); err == nil {
			if t.CancelRequestedAt != nil {
				o.cancelWanted = true
				return interrupted
			}
			o.turn = t
		}
		var req model.Request
		err := o.durable("compile context", func(ctx context.Context) error {
			var err error
			req, err = o.compile(ctx)
			return err
		}, nil)
		if err != nil {
			if o.ctx.Err() != nil || o.cancelWanted {
				return interrupted
			}
			if protocol.IsCode(err, protocol.ModelFailure) {
				return ended(store.TurnFailed, protocol.ErrorOf(err))
			}
			return ended(store.TurnFailed, c.serviceError("compile context", err))
		}
		o.rounds++
		calls, out := o.stream(req)
		if out != nil {
			return *out
		}
		if len(calls) == 0 {
			return ended(store.TurnCompleted, nil)
		}
		proposed := false
		var overCap *protocol.Error
		if max := c.cfg.MaxToolCallsPerAnswer; len(calls) > max {
			// One answer asked for too much: the calls past the cap do not
			// run; the first of them is answered with why (the model sees
			// it next round), the rest are not stored at all.
			over := len(calls) - max
			calls = calls[:max+1]
			overCap = protocol.Errorf(protocol.Validation,
				"the model made %d tool calls in one answer; at most %d run, and the other %d (this one included) did not: ask again with fewer",
				max+over, max, over).With("limit", "tool_calls_per_answer").With("max", max).With("dropped", over)
			c.log.Warn("tool calls past the cap of one answer were not run", "request", o.turn.RequestID, "calls", max+over, "max", max)
		}
		seenIDs := map[string]bool{}
		for i := range calls {
			// The call id pairs a tool_call with its tool_result: one the
			// model left out, repeated or made unusable gets a fresh one.
			if id := calls[i].ID; !usableCallID(id) || seenIDs[id] {
				calls[i].ID = "call_" + uuid.NewString()
			}
			seenIDs[calls[i].ID] = true
			var refuse *protocol.Error
			if i == c.cfg.MaxToolCallsPerAnswer {
				refuse = overCap
			} else {
				refuse = c.notForClient(calls[i].Name, req.Client)
			}
			res := o.callTool(calls[i], req.View, refuse)
			if res.out != nil {
				return *res.out
			}
			proposed = proposed || res.proposed
			o.takeCancels(false)
			if o.cancelWanted {
				return interrupted
			}
		}
		if proposed {
			if out := o.awaitConfirmation(); out != nil {
				return *out
			}
			// Decided already, by another daemon: go on with the result.
		}
	}
}

// usableCallID reports whether a model's call id can pair a tool_call
// with its tool_result as it is: 1 to 128 printable ASCII characters.
func usableCallID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// awaitConfirmation parks the turn on its open proposal. A nil outcome
// means the proposal was decided already (by another daemon): the turn
// goes on with the result.
func (o *owner) awaitConfirmation() *outcome {
	c := o.c
	var ok bool
	err := o.durable("await confirmation", func(ctx context.Context) error {
		var err error
		ok, err = c.store.AwaitConfirmation(ctx, store.AwaitConfirmationParams{RequestID: o.turn.RequestID})
		return err
	}, func(ctx context.Context) (bool, error) {
		t, err := c.store.GetTurn(ctx, o.turn.RequestID)
		if err == nil && t.Status == store.TurnAwaitingConfirmation {
			ok = true
			return true, nil
		}
		return false, err
	})
	if store.IsFenced(err) {
		o.lost("await confirmation", err)
	}
	if err != nil {
		out := ended(store.TurnFailed, c.serviceError("await confirmation", err))
		return &out
	}
	if ok {
		return &parked
	}
	return nil
}

// compile builds the model request from stored frames: the newest complete
// earlier turns within the D7 budget, then this turn's frames so far (its
// instruction, text, tool calls and results). The receipt of the history
// goes into the turn's context_json.
func (o *owner) compile(ctx context.Context) (model.Request, error) {
	c, t := o.c, o.turn
	var rec contextRecord
	if err := protocol.Unmarshal(t.ContextJSON, &rec); err != nil {
		return model.Request{}, err
	}
	// The reads end with the turn (the shutdown's deadline, a cancel):
	// durable's context outlives it, so that writes finish, but a turn of
	// very many frames must not hold the shutdown while it is read.
	// AfterFunc stops them from a goroutine of its own, which may not have
	// run yet when the turn has already ended: then no read starts.
	if err := o.ctx.Err(); err != nil {
		return model.Request{}, err
	}
	read, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(o.ctx, stop)()
	if o.ctx.Err() != nil {
		stop() // AfterFunc calls stop on a goroutine of its own: a turn already ended reads nothing
	}
	current, first, err := c.turnMessages(read, t)
	if err != nil {
		return model.Request{}, err
	}
	if first == 0 {
		return model.Request{}, fmt.Errorf("turn %s has no frames", t.RequestID)
	}
	history, err := c.loadHistory(read, t.ConversationID, first)
	if err != nil {
		return model.Request{}, err
	}
	if o.model == nil {
		conv, err := c.store.GetConversation(ctx, t.ConversationID)
		if err != nil {
			return model.Request{}, err
		}
		if o.model, err = c.modelFor(conv, rec); err != nil {
			return model.Request{}, err
		}
	}
	picked, rcpt := selectHistory(history, maxContextFrames, maxContextBytes)
	rcpt.Model, rcpt.Provider = o.model.Name, o.model.Kind
	if rec.Receipt == nil || *rec.Receipt != rcpt {
		rec.Receipt = &rcpt
		record, err := protocol.Marshal(rec)
		if err != nil {
			return model.Request{}, err
		}
		if err := c.store.SetTurnContext(ctx, store.SetTurnContextParams{RequestID: t.RequestID, ContextJSON: record, ContextHash: rcpt.Hash}); err != nil {
			return model.Request{}, err
		}
		o.turn.ContextJSON = record
	}
	msgs := append(messages(picked), current...)
	snap := rec.Snapshot
	return model.Request{System: systemPrompt(snap, rec.Client), Messages: msgs, Tools: c.cfg.Tools.Catalog(rec.Client),
		View: &snap, Client: rec.Client}, nil
}

// turnPage is how many of a turn's frames are read at a time.
const turnPage = 500

// scanTurn reads one turn's frames a page at a time, in order, handing
// each to fn until fn returns false; no more than a page is held. It
// stops when ctx ends.
func (c *Coordinator) scanTurn(ctx context.Context, t store.Turn, fn func(store.Frame) bool) error {
	after := int64(0)
	for {
		page, err := c.store.ListFrames(ctx, store.ListFramesParams{ConversationID: t.ConversationID, RequestID: t.RequestID, AfterSequence: after, Limit: turnPage})
		if err != nil {
			return err
		}
		for _, f := range page {
			if !fn(f) {
				return nil
			}
		}
		if len(page) < turnPage {
			return nil
		}
		after = page[len(page)-1].Sequence
	}
}

// turnMessages builds the model messages of one turn's frames without
// holding the frames, and the sequence of its first frame (0: none).
func (c *Coordinator) turnMessages(ctx context.Context, t store.Turn) ([]model.Message, int64, error) {
	var b messageBuilder
	var first int64
	err := c.scanTurn(ctx, t, func(f store.Frame) bool {
		if first == 0 {
			first = f.Sequence
		}
		b.add(f)
		return true
	})
	if err != nil {
		return nil, 0, err
	}
	return b.done(), first, nil
}

// agentTalk is an agent turn's one round: its command tool call, through
// callTool like a model's, parking on the proposal it makes. Once decided
// (rounds counts the call, after a restart too) the turn completes: the
// outcome is in its confirmation and tool_result frames.
func (o *owner) agentTalk(a agentCall) outcome {
	if o.cancelWanted {
		return interrupted
	}
	if o.rounds > 0 {
		return ended(store.TurnCompleted, nil)
	}
	o.rounds++
	res := o.callTool(model.ToolCall{ID: a.CallID, Name: a.Tool, Arguments: a.Arguments}, nil, nil)
	if res.out != nil {
		return *res.out
	}
	if !res.proposed {
		return ended(store.TurnCompleted, nil)
	}
	if out := o.awaitConfirmation(); out != nil {
		return *out
	}
	return ended(store.TurnCompleted, nil)
}
