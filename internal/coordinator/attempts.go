package coordinator

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The attempts of one model round: stream runs attempts with retries and
// backoff within the turn's model budget; attempt streams one answer into
// text frames under its three deadlines, and a cancel ends it at once.

// stream runs one model round, retrying with capped backoff when the provider
// says the failure is retryable and the failed attempt emitted nothing: no
// text frame, no tool call, so no proposal either (docs/design.md §13: never
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
			obs.ErrorCode, obs.Error = a.err.Code, a.err.Message
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
		c.log.Warn("model call failed; retrying", "conversation", o.turn.ConversationID, "request", o.turn.RequestID, "model", o.model.Name,
			"code", a.err.Code, "attempt", attempt+1, "wait", wait, "err", a.err.Message)
		o.reportRetry(attempt+2, a.err.Code, wait)
		if out := o.sleep(wait); out != nil {
			return nil, out
		}
		o.modelSpent += wait
		o.report(protocol.ProgressWorking, nil)
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

// sleep waits d, taking requests in; a non-nil outcome means a cancel or
// the shutdown cut it short.
func (o *owner) sleep(d time.Duration) *outcome {
	if !o.wait(d, o.ctx.Done()) {
		return &interrupted
	}
	return nil
}

// overBudget is the end of a turn whose model attempts, with the waits
// between them, took longer than Config.ModelBudget in all: one slow or
// silent provider cannot hold a worker for longer. Not retryable.
func (o *owner) overBudget() *protocol.Error {
	return protocol.Errorf(protocol.ModelFailure, "the model took longer than %s in all for this turn; the turn was stopped", o.c.cfg.ModelBudget).
		With("limit", "model_time_per_turn").With("max", o.c.cfg.ModelBudget.String())
}
