package httpapi_test

import (
	"context"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
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

func TestRetryableModelFailureIsRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		stream    func(n int32) ([]model.Event, error)
		calls     int32
		outcome   protocol.Outcome
		errorCode protocol.ErrorCode
	}{
		{"rate limited then fine", func(n int32) ([]model.Event, error) {
			if n == 0 {
				return nil, &protocol.Error{Code: protocol.RateLimited, Message: "slow down", Retryable: true, RetryAfterMs: 5}
			}
			return []model.Event{textEv("ok")}, nil
		}, 2, "completed", ""},
		{"retryable failures until the cap", func(int32) ([]model.Event, error) {
			return nil, &protocol.Error{Code: protocol.ModelFailure, Message: "503", Retryable: true}
		}, 4, "failed", protocol.ModelFailure},
		{"not retryable: once", func(int32) ([]model.Event, error) {
			return nil, &protocol.Error{Code: protocol.ModelFailure, Message: "bad key: check STUDIO_OPENAI_API_KEY", Retryable: false}
		}, 1, "failed", protocol.ModelFailure},
		{"text already streamed: not retried", func(int32) ([]model.Event, error) {
			return []model.Event{textEv("partial")}, &protocol.Error{Code: protocol.ModelFailure, Message: "EOF mid-stream", Retryable: true}
		}, 1, "failed", protocol.ModelFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fp := &fakeProvider{stream: tc.stream}
			h := newHarness(t, harnessOpts{provider: fp})
			c := h.conversation()
			acc := h.submit(c.ID, "hello")
			frames := h.waitDone(c.ID, acc.RequestID)
			if got := fp.calls.Load(); got != tc.calls {
				t.Fatalf("provider called %d times, want %d", got, tc.calls)
			}
			if d := frames[len(frames)-1].Payload.(protocol.DonePayload); d.Outcome != tc.outcome {
				t.Fatalf("outcome %s", d.Outcome)
			}
			if tc.errorCode != "" {
				e, ok := frames[len(frames)-2].Payload.(protocol.ErrorPayload)
				if !ok || e.Error.Code != tc.errorCode {
					t.Fatalf("error frame %+v", frames[len(frames)-2])
				}
			}
		})
	}
}
