package httpapi_test

import (
	"context"
	"iter"
	"sync/atomic"

	"github.com/studio/operator/internal/model"
)

// fakeProvider is a provider made of a function: attempt n (from 0) decides.
type fakeProvider struct {
	calls  atomic.Int32
	stream func(n int32) ([]model.Event, error)
}

func (f *fakeProvider) Name() string { return "fake" }

func (f *fakeProvider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	n := f.calls.Add(1) - 1
	evs, err := f.stream(n)
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

func textEv(s string) model.Event { return model.Event{Kind: model.EventText, Text: s} }
