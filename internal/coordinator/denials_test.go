package coordinator_test

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
)

// deniedResults are the tool results of a request refused as recently denied.
func deniedResults(frames []protocol.Frame, requestID string) int {
	n := 0
	for _, f := range ofRequest(frames, requestID) {
		if r, ok := f.Payload.(protocol.ToolResultPayload); ok && r.Error != nil &&
			r.Error.Code == protocol.Validation && r.Error.Details["reason"] == "denied_recently" {
			n++
		}
	}
	return n
}

// TestDeniedCommandIsNotProposedAgain: once a person denies a command, the
// model proposing the same command again — in the same turn, or in a later
// one whose instruction does not ask for it — gets a validation result
// saying it was denied, and no proposal; an instruction that names it
// again lifts that, and so does the end of the memory's window.
func TestDeniedCommandIsNotProposedAgain(t *testing.T) {
	t.Parallel()
	del := toolStep("delete_schedule", `{"schedule":"nightly-audit"}`)
	text := script.Step{Text: ptr("ok")}
	s := script.Script{Turns: []script.Turn{
		{Match: "tidy", Steps: []script.Step{del, del, text}},
		{Match: "please", Steps: []script.Step{del, text}},
		{Steps: []script.Step{del, text}},
	}}
	e := newEngine(t, engineOpts{script: &s})
	conv := e.conversation()

	acc := e.submit(conv, "tidy up the schedules")
	frames := e.denyEach(conv, acc.RequestID)
	if n := len(e.proposals(acc.RequestID)); n != 1 {
		t.Fatalf("%d proposals of the denied command in one turn, want 1: %v", n, kinds(frames))
	}
	if n := deniedResults(frames, acc.RequestID); n != 1 {
		t.Fatalf("%d denied results: %v", n, kinds(frames))
	}
	if k := kinds(frames); k[len(k)-1] != "done:completed" {
		t.Fatalf("the turn did not go on: %v", k)
	}

	// A later instruction that does not ask for it.
	acc = e.submit(conv, "what else is there?")
	frames = e.waitDone(conv, acc.RequestID)
	if n := len(e.proposals(acc.RequestID)); n != 0 || deniedResults(frames, acc.RequestID) != 1 {
		t.Fatalf("a new turn proposed the denied command again: %d proposals, %v", n, kinds(frames))
	}

	// The person asks for it: proposed again.
	acc = e.submit(conv, "please delete schedule nightly-audit after all")
	e.waitProposal(conv, acc.RequestID)
	if n := len(e.proposals(acc.RequestID)); n != 1 {
		t.Fatalf("%d proposals when the person asked again", n)
	}
	e.denyEach(conv, acc.RequestID)

	// Past the window, the model may propose it again.
	e.clock.Advance(coordinator.DefaultDenialMemory + time.Second)
	acc = e.submit(conv, "what else is there?")
	e.waitProposal(conv, acc.RequestID)
}
