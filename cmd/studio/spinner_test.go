package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
)

func TestTurnStateOfFrames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    protocol.Payload
		want string
	}{
		{protocol.TextPayload{Content: "hi", Format: "plain", Role: protocol.RoleUser}, turnQueued},
		{protocol.TextPayload{Content: "hi", Format: "markdown", Role: protocol.RoleAssistant}, turnWorking},
		{protocol.ToolCallPayload{Tool: "list_runs"}, "calling list_runs"},
		{protocol.ProposalPayload{}, turnWaiting},
		{protocol.ConfirmationPayload{State: protocol.ConfirmationRequired}, turnWaiting},
		{protocol.ConfirmationPayload{State: protocol.ConfirmationConfirmed}, "executing the confirmed command"},
		{protocol.ConfirmationPayload{State: protocol.ConfirmationExecuted}, turnWorking},
		{protocol.DonePayload{Outcome: protocol.OutcomeCompleted}, ""},
	}
	for _, c := range cases {
		if got := turnStateOf(protocol.Frame{Payload: c.p}); got != c.want {
			t.Errorf("%T %+v: %q, want %q", c.p, c.p, got, c.want)
		}
	}
}

// Off a terminal the status line draws nothing and output passes through.
func TestSpinnerOffTerminal(t *testing.T) {
	t.Parallel()
	var errw, out bytes.Buffer
	s := newSpinner(&errw)
	w := s.output(&out)
	s.set(turnQueued)
	s.print(func() { fmt.Fprint(w, "partial") })
	s.stop()
	s.stop() // idempotent
	if errw.Len() != 0 || out.String() != "partial" {
		t.Fatalf("stderr %q, stdout %q", errw.String(), out.String())
	}
}

// The status line says what the server's progress says: the place in
// line, a retry and when, a decision awaited.
func TestProgressWords(t *testing.T) {
	t.Parallel()
	retryAt := time.Date(2026, 11, 30, 18, 31, 5, 0, time.Local)
	cases := []struct {
		p    protocol.TurnProgress
		want string
	}{
		{protocol.TurnProgress{State: protocol.ProgressQueued, QueuePosition: 3}, "queued: number 3 in line for the model"},
		{protocol.TurnProgress{State: protocol.ProgressQueued}, turnQueued},
		{protocol.TurnProgress{State: protocol.ProgressWorking}, turnWorking},
		{protocol.TurnProgress{State: protocol.ProgressRetrying, Attempt: 2, ErrorCode: protocol.RateLimited, RetryAt: protocol.Timestamp(retryAt)},
			"the model is rate limited; attempt 2 at 18:31:05"},
		{protocol.TurnProgress{State: protocol.ProgressRetrying, Attempt: 3, ErrorCode: protocol.ModelFailure, RetryAt: protocol.Timestamp(retryAt)},
			"the model failed (model_failure); attempt 3 at 18:31:05"},
		{protocol.TurnProgress{State: protocol.ProgressAwaitingConfirmation}, turnWaiting},
		{protocol.TurnProgress{State: protocol.ProgressExecuting}, "executing the confirmed command"},
		{protocol.TurnProgress{State: protocol.ProgressDatabaseUnavailable, Attempt: 4, ErrorCode: protocol.ServiceFailure, RetryAt: protocol.Timestamp(retryAt)},
			"the database is unavailable; attempt 4 at 18:31:05"},
	}
	for _, c := range cases {
		if got := progressWords(&c.p); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}
