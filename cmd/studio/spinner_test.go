package main

import (
	"bytes"
	"fmt"
	"testing"

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
