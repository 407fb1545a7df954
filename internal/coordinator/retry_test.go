package coordinator_test

import (
	"testing"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/modeltest"
	"github.com/studio/operator/internal/protocol"
)

// The engine retries a retryable model failure (after its retry-after, up
// to ModelRetries times) while nothing was shown; a failure that is not
// retryable, or that comes after text, ends the turn failed at once.
func TestRetryableModelFailureIsRetried(t *testing.T) {
	t.Parallel()
	text := func(s string) model.Event { return model.Event{Kind: model.EventText, Text: s} }
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
			return []model.Event{text("ok")}, nil
		}, 2, "completed", ""},
		{"retryable failures until the cap", func(int32) ([]model.Event, error) {
			return nil, &protocol.Error{Code: protocol.ModelFailure, Message: "503", Retryable: true}
		}, 4, "failed", protocol.ModelFailure},
		{"not retryable: once", func(int32) ([]model.Event, error) {
			return nil, &protocol.Error{Code: protocol.ModelFailure, Message: "bad key", Retryable: false}
		}, 1, "failed", protocol.ModelFailure},
		{"text already streamed: not retried", func(int32) ([]model.Event, error) {
			return []model.Event{text("partial")}, &protocol.Error{Code: protocol.ModelFailure, Message: "EOF mid-stream", Retryable: true}
		}, 1, "failed", protocol.ModelFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := modeltest.NewAttempts(tc.stream)
			e := newEngine(t, engineOpts{provider: p})
			conv := e.conversation()
			acc := e.submit(conv, "hello")
			frames := e.waitDone(conv, acc.RequestID)
			if got := p.Calls(); got != tc.calls {
				t.Fatalf("provider called %d times, want %d (frames %v)", got, tc.calls, kinds(frames))
			}
			if d := frames[len(frames)-1].Payload.(protocol.DonePayload); d.Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s", d.Outcome, tc.outcome)
			}
			if tc.errorCode != "" {
				if ep, ok := frames[len(frames)-2].Payload.(protocol.ErrorPayload); !ok || ep.Error.Code != tc.errorCode {
					t.Fatalf("error frame %+v, want %s", frames[len(frames)-2], tc.errorCode)
				}
			}
		})
	}
}
