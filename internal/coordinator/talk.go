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

// outcomeKind is how a stretch of talking to the model ended.
type outcomeKind int

const (
	outcomeEnded       outcomeKind = iota + 1 // the turn is to end with status (and err)
	outcomeParked                             // a proposal waits for a human
	outcomeInterrupted                        // a cancel or the shutdown stopped it
)

// outcome is what talk returns: a typed result instead of a sentinel.
type outcome struct {
	kind   outcomeKind
	status store.TurnStatus
	err    *protocol.Error
}

func ended(status store.TurnStatus, err *protocol.Error) outcome {
	return outcome{kind: outcomeEnded, status: status, err: err}
}

var (
	parked      = outcome{kind: outcomeParked}
	interrupted = outcome{kind: outcomeInterrupted}
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
		for i := range calls {
			if calls[i].ID == "" { // the call id pairs a tool_call with its tool_result
				calls[i].ID = "call_" + uuid.NewString()
			}
			var refuse *protocol.Error
			if i == c.cfg.MaxToolCallsPerAnswer {
				refuse = overCap
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
	msgs := append(messages(picked), messages(current)...)
	snap := rec.Snapshot
	return model.Request{System: systemPrompt(snap), Messages: msgs, Tools: c.cfg.Tools.Catalog(), View: &snap}, nil
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

// stream runs one model round, retrying with capped backoff when the
// provider says the failure is retryable and the failed attempt emitted
// nothing: no text frame, no tool call, so no proposal either (ADR D7: never
// retry past a confirmed proposal; a round proposes only after its stream
// ended). A non-nil outcome ends the talk.
func (o *owner) stream(req model.Request) ([]model.ToolCall, *outcome) {
	c := o.c
	for attempt := 0; ; attempt++ {
		left := c.cfg.ModelBudget - o.modelSpent
		if left <= 0 {
			out := ended(store.TurnFailed, o.overBudget())
			return nil, &out
		}
		a := o.attempt(req, left)
		o.modelSpent += a.duration
		retry := a.err != nil && a.err.Retryable && !a.wrote && attempt < c.cfg.ModelRetries &&
			(a.err.Code == protocol.ModelFailure || a.err.Code == protocol.RateLimited)
		obs := ModelAttempt{ConversationID: o.turn.ConversationID, RequestID: o.turn.RequestID, Model: o.model.Name,
			Attempt: attempt, TimeToFirstEvent: a.firstEvent, Duration: a.duration, Retried: retry}
		if a.err != nil {
			obs.ErrorCode = a.err.Code
		}
		c.obs.ModelAttempt(obs)
		switch {
		case a.out != nil:
			return nil, a.out
		case a.err == nil:
			return a.calls, nil
		case !retry:
			out := ended(store.TurnFailed, a.err)
			return nil, &out
		}
		wait := min(c.cfg.RetryBackoff<<attempt, c.cfg.MaxRetryBackoff)
		if hint := time.Duration(a.err.RetryAfterMs) * time.Millisecond; hint > wait {
			wait = min(hint, c.cfg.MaxRetryWait)
		}
		c.log.Warn("model call failed; retrying", "request", o.turn.RequestID, "code", a.err.Code, "attempt", attempt+1, "wait", wait)
		o.reportRetry(attempt+2, a.err.Code, wait)
		if out := o.sleep(wait); out != nil {
			return nil, out
		}
		o.modelSpent += wait
		o.report(protocol.ProgressWorking, nil)
	}
}

// sleep waits d, taking requests in; a non-nil outcome means a cancel or
// the shutdown cut it short.
func (o *owner) sleep(d time.Duration) *outcome {
	if !o.wait(d, o.ctx.Done()) {
		return &interrupted
	}
	return nil
}

// wait waits d, taking requests in meanwhile (cancels are answered at once
// while the turn is ending). It returns false early when stop closes or,
// unless the turn is ending, when a cancel arrives.
func (o *owner) wait(d time.Duration, stop <-chan struct{}) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return true
		case <-stop:
			return false
		case <-o.box.sig:
			ending := o.phase == phaseEnding
			o.takeCancels(ending)
			o.answerStaleDecisions()
			if o.cancelWanted && !ending {
				return false
			}
		}
	}
}

// attemptResult is one call of the provider.
type attemptResult struct {
	wrote      bool // text was written as frames (not kept: a long answer is already in the store)
	calls      []model.ToolCall
	err        *protocol.Error // the attempt failed
	out        *outcome        // the talk ends (interrupted, or a frame could not be stored)
	firstEvent time.Duration
	duration   time.Duration
}

// Deadline causes of an attempt's cancellation.
var (
	errFirstEvent = errors.New("no first event in time")
	errIdle       = errors.New("no event for too long")
	errAttempt    = errors.New("the attempt took too long")
)

// attempt streams one model answer into text frames and returns the tool
// calls it made. Text deltas are coalesced: a frame at most every TextFlush,
// and pending text is written when the model pauses. Three deadlines bound
// the attempt (time to the first event, idle time between events, total
// time); a deadline ends it with a retryable model_failure. A cancel ends it
// at once.
func (o *owner) attempt(req model.Request, left time.Duration) (res attemptResult) {
	c := o.c
	start := time.Now()
	defer func() { res.duration = time.Since(start) }()
	actx, stopAttempt := context.WithCancelCause(o.ctx)
	defer stopAttempt(nil)
	events, stop := pump(actx, func(ctx context.Context) iter.Seq2[model.Event, error] {
		return o.model.Provider.Stream(ctx, req)
	})
	defer stop()

	var buf strings.Builder
	wrote := false // a text frame was emitted: the attempt can no longer be retried
	flush := func() *protocol.Error {
		if buf.Len() == 0 {
			return nil
		}
		text := buf.String()
		wrote = true
		buf.Reset()
		return o.emit(protocol.TextPayload{Content: text, Format: "markdown", Role: protocol.RoleAssistant})
	}
	fail := func(perr *protocol.Error) attemptResult {
		if ferr := flush(); ferr != nil {
			out := ended(store.TurnFailed, ferr)
			return attemptResult{out: &out}
		}
		return attemptResult{wrote: wrote, err: perr}
	}
	deadline := time.NewTimer(c.cfg.FirstEventTimeout)
	defer deadline.Stop()
	deadlineCause := errFirstEvent
	total := time.NewTimer(min(c.cfg.AttemptTimeout, left))
	defer total.Stop()
	budgetBound := left < c.cfg.AttemptTimeout // the turn's model time ends first
	var flushTimer *time.Timer
	var flushC <-chan time.Time
	defer func() {
		if flushTimer != nil {
			flushTimer.Stop()
		}
	}()
	for {
		select {
		case <-o.box.sig:
			o.takeCancels(false)
			o.answerStaleDecisions()
			if o.cancelWanted {
				stopAttempt(errCancelled)
				return attemptResult{out: &interrupted}
			}
		case <-o.ctx.Done():
			return attemptResult{out: &interrupted}
		case <-deadline.C:
			stopAttempt(deadlineCause)
			return fail(deadlineError(deadlineCause, c.cfg))
		case <-total.C:
			stopAttempt(errAttempt)
			if budgetBound {
				return fail(o.overBudget())
			}
			return fail(deadlineError(errAttempt, c.cfg))
		case <-flushC:
			flushC = nil
			if perr := flush(); perr != nil {
				out := ended(store.TurnFailed, perr)
				return attemptResult{out: &out}
			}
		case item, ok := <-events:
			if !ok {
				if perr := flush(); perr != nil {
					out := ended(store.TurnFailed, perr)
					return attemptResult{out: &out}
				}
				return attemptResult{wrote: wrote, calls: res.calls, firstEvent: res.firstEvent}
			}
			if res.firstEvent == 0 {
				res.firstEvent = time.Since(start)
			}
			deadline.Reset(c.cfg.IdleTimeout)
			deadlineCause = errIdle
			if item.err != nil {
				r := fail(modelError(item.err))
				r.firstEvent = res.firstEvent
				return r
			}
			switch item.ev.Kind {
			case model.EventText:
				buf.WriteString(item.ev.Text)
				if buf.Len() >= 8<<10 {
					if perr := flush(); perr != nil {
						out := ended(store.TurnFailed, perr)
						return attemptResult{out: &out}
					}
				} else if flushC == nil {
					if flushTimer == nil {
						flushTimer = time.NewTimer(c.cfg.TextFlush)
					} else {
						flushTimer.Reset(c.cfg.TextFlush)
					}
					flushC = flushTimer.C
				}
			case model.EventToolCall:
				res.calls = append(res.calls, item.ev.ToolCall)
			}
		}
	}
}

var errCancelled = errors.New("cancel requested")

// overBudget is the end of a turn whose model attempts, with the waits
// between them, took longer than Config.ModelBudget in all: one slow or
// silent provider cannot hold a worker for longer. Not retryable.
func (o *owner) overBudget() *protocol.Error {
	return protocol.Errorf(protocol.ModelFailure, "the model took longer than %s in all for this turn; the turn was stopped", o.c.cfg.ModelBudget).
		With("limit", "model_time_per_turn").With("max", o.c.cfg.ModelBudget.String())
}

// deadlineError types a model deadline: retryable, so the attempt is
// retried under the usual rules.
func deadlineError(cause error, cfg Config) *protocol.Error {
	var msg string
	var d time.Duration
	switch cause {
	case errFirstEvent:
		msg, d = "the model sent nothing within %s", cfg.FirstEventTimeout
	case errIdle:
		msg, d = "the model stopped streaming for %s", cfg.IdleTimeout
	default:
		msg, d = "the model's answer took longer than %s", cfg.AttemptTimeout
	}
	return (&protocol.Error{Code: protocol.ModelFailure, Retryable: true, Message: fmt.Sprintf(msg, d)}).
		With("deadline", cause.Error())
}

type streamItem struct {
	ev  model.Event
	err error
}

// pump runs a provider stream on its own goroutine so the owner can wait on
// the stream, its mailbox and timers at once. stop ends the goroutine and
// waits for it.
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

// modelError types whatever a provider returned.
func modelError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return protocol.Errorf(protocol.ModelFailure, "the model provider failed: %v", err)
}

// serviceError logs an internal failure and types it for the client.
func (c *Coordinator) serviceError(what string, err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	c.log.Error(what, "err", err)
	return &protocol.Error{Code: protocol.ServiceFailure, Retryable: true, Message: what + " failed: the state database did not accept the write"}
}
