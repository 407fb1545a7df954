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
// calls it made. Text deltas are coalesced (pendingText). Three deadlines
// bound the attempt (attemptDeadlines); a deadline ends it with a
// retryable model_failure. A cancel ends it at once.
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
	text := &pendingText{o: o, every: c.cfg.TextFlush}
	defer text.stop()
	dl := newAttemptDeadlines(c.cfg, left)
	defer dl.stop()
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
		case <-dl.next.C:
			stopAttempt(dl.cause)
			return text.fail(deadlineError(dl.cause, c.cfg))
		case <-dl.total.C:
			stopAttempt(errAttempt)
			if dl.budgetBound {
				return text.fail(o.overBudget())
			}
			return text.fail(deadlineError(errAttempt, c.cfg))
		case <-text.due:
			text.due = nil
			if perr := text.flush(); perr != nil {
				return endedFailed(perr)
			}
		case item, ok := <-events:
			if !ok {
				if perr := text.flush(); perr != nil {
					return endedFailed(perr)
				}
				return attemptResult{wrote: text.wrote, calls: res.calls, firstEvent: res.firstEvent}
			}
			if res.firstEvent == 0 {
				res.firstEvent = time.Since(start)
			}
			dl.sawEvent(c.cfg.IdleTimeout)
			if item.err != nil {
				r := text.fail(modelError(item.err))
				r.firstEvent = res.firstEvent
				return r
			}
			switch item.ev.Kind {
			case model.EventText:
				if perr := text.add(item.ev.Text); perr != nil {
					return endedFailed(perr)
				}
			case model.EventToolCall:
				res.calls = append(res.calls, item.ev.ToolCall)
			}
		}
	}
}

// endedFailed is an attempt that ends its turn failed with perr: a frame
// of it could not be written.
func endedFailed(perr *protocol.Error) attemptResult {
	out := ended(store.TurnFailed, perr)
	return attemptResult{out: &out}
}

// pendingText is an attempt's text not written yet: a frame at most every
// TextFlush (due fires then), at once past 8 KiB, and the rest when the
// attempt ends.
type pendingText struct {
	o     *owner
	every time.Duration
	buf   strings.Builder
	wrote bool // a text frame was emitted: the attempt can no longer be retried
	timer *time.Timer
	due   <-chan time.Time // nil while no flush is due
}

// add takes in a text delta, writing the pending text when it is large.
func (p *pendingText) add(text string) *protocol.Error {
	p.buf.WriteString(text)
	if p.buf.Len() >= 8<<10 {
		return p.flush()
	}
	if p.due == nil {
		if p.timer == nil {
			p.timer = time.NewTimer(p.every)
		} else {
			p.timer.Reset(p.every)
		}
		p.due = p.timer.C
	}
	return nil
}

// flush writes the pending text as one frame.
func (p *pendingText) flush() *protocol.Error {
	if p.buf.Len() == 0 {
		return nil
	}
	text := p.buf.String()
	p.wrote = true
	p.buf.Reset()
	return p.o.emit(protocol.TextPayload{Content: text, Format: "markdown", Role: protocol.RoleAssistant})
}

// fail ends the attempt with perr, after the text the model sent before it.
func (p *pendingText) fail(perr *protocol.Error) attemptResult {
	if ferr := p.flush(); ferr != nil {
		return endedFailed(ferr)
	}
	return attemptResult{wrote: p.wrote, err: perr}
}

func (p *pendingText) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// attemptDeadlines are an attempt's three deadlines: next is the first
// event's, then after each event the idle time's (cause says which);
// total is the attempt's, or the turn's model time when that ends first
// (budgetBound).
type attemptDeadlines struct {
	next        *time.Timer
	cause       error
	total       *time.Timer
	budgetBound bool
}

func newAttemptDeadlines(cfg Config, left time.Duration) *attemptDeadlines {
	return &attemptDeadlines{next: time.NewTimer(cfg.FirstEventTimeout), cause: errFirstEvent,
		total: time.NewTimer(min(cfg.AttemptTimeout, left)), budgetBound: left < cfg.AttemptTimeout}
}

// sawEvent restarts next as the idle deadline.
func (d *attemptDeadlines) sawEvent(idle time.Duration) {
	d.next.Reset(idle)
	d.cause = errIdle
}

func (d *attemptDeadlines) stop() {
	d.next.Stop()
	d.total.Stop()
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
