package modeltest

import (
	"context"
	"iter"
	"sync/atomic"

	"github.com/studio/operator/internal/model"
)

// Attempts is a provider made of a function: attempt n (from 0) streams
// the events script returns, then its error if any. Engine tests script
// retries and failures with it.
type Attempts struct {
	calls  atomic.Int32
	script func(n int32) ([]model.Event, error)
}

// NewAttempts is a provider whose attempt n streams what script(n) returns.
func NewAttempts(script func(n int32) ([]model.Event, error)) *Attempts {
	return &Attempts{script: script}
}

// Calls is how many attempts were made.
func (a *Attempts) Calls() int32 { return a.calls.Load() }

// Name implements model.Provider.
func (a *Attempts) Name() string { return "attempts" }

// Stream implements model.Provider: the next attempt's events.
func (a *Attempts) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	n := a.calls.Add(1) - 1
	evs, err := a.script(n)
	return func(yield func(model.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
		if err != nil {
			yield(model.Event{}, err)
		}
	}
}
