package main

import (
	"context"
	"testing"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// The safety boundary as the built daemon keeps it: what a scripted model
// asks for, checked before a human sees it; its hash bound to the
// proposal; its time bounded.

// boundaryScript: "stale" updates a seeded playbook at a version it never
// had, "taken" creates a playbook under a seeded name, "toggle" proposes
// enabling the seeded schedule, "silent" never answers.
const boundaryScript = `{"turns":[
 {"match":"stale","steps":[{"tool":"update_playbook","arguments":{"playbook":"audit-repo","expectedVersion":99,"description":"x"}},{"text":"ok"}]},
 {"match":"taken","steps":[{"tool":"create_playbook","arguments":{"name":"audit-repo","prompt":"p"}},{"text":"ok"}]},
 {"match":"toggle","steps":[{"tool":"set_schedule_enabled","arguments":{"schedule":"nightly-audit","enabled":true}},{"text":"ok"}]},
 {"match":"silent","steps":[{"sleepMs":600000}]}]}`

// turnFramesOf submits instruction in a new conversation and collects the
// turn's frames until stop says so (or its done).
func turnFramesOf(t *testing.T, ctx context.Context, d *daemon, instruction string, stop func(protocol.Frame) bool) []protocol.Frame {
	t.Helper()
	conv := newConversation(t, ctx, d)
	acc := submit(t, ctx, d, conv.ID, instruction)
	var frames []protocol.Frame
	err := d.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
		if f.RequestID != acc.RequestID {
			return nil
		}
		frames = append(frames, f)
		if f.Type == protocol.FrameDone || (stop != nil && stop(f)) {
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// TestProcessCommandsThatCannotRunAreNotProposed: a stale expectedVersion
// and a taken name are the tool's conflict, before any proposal.
func TestProcessCommandsThatCannotRunAreNotProposed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir(), "--model", "script:"+writeScript(t, boundaryScript))
	ctx := testCtx(t)
	for _, instruction := range []string{"stale", "taken"} {
		frames := turnFramesOf(t, ctx, d, instruction, nil)
		var conflict bool
		for _, f := range frames {
			switch p := f.Payload.(type) {
			case protocol.ProposalPayload:
				t.Fatalf("%s: a command that cannot run became proposal %s", instruction, p.Proposal.ID)
			case protocol.ToolResultPayload:
				conflict = conflict || (!p.OK && p.Error != nil && p.Error.Code == protocol.Conflict)
			}
		}
		if !conflict {
			t.Fatalf("%s: no conflict tool result in %d frames", instruction, len(frames))
		}
	}
}

// TestProcessSameCommandTwoHashes: the same command proposed in two turns
// has two hashes, each bound to its proposal.
func TestProcessSameCommandTwoHashes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir(), "--model", "script:"+writeScript(t, boundaryScript))
	ctx := testCtx(t)
	var props []protocol.CommandProposal
	for range 2 {
		frames := turnFramesOf(t, ctx, d, "toggle", func(f protocol.Frame) bool { return f.Type == protocol.FrameProposal })
		p, ok := frames[len(frames)-1].Payload.(protocol.ProposalPayload)
		if !ok {
			t.Fatalf("no proposal: %d frames", len(frames))
		}
		props = append(props, p.Proposal)
	}
	a, b := props[0], props[1]
	if string(a.Command) != string(b.Command) || a.CommandHash == b.CommandHash {
		t.Fatalf("proposals of %s / %s share hash %s / %s", a.Command, b.Command, a.CommandHash, b.CommandHash)
	}
	if want, _ := protocol.ProposalHash(a.Command, a.ID); a.CommandHash != want {
		t.Fatalf("hash %s, want %s", a.CommandHash, want)
	}
}

// TestProcessModelBudget: a model that never answers holds its turn no
// longer than --model-turn-budget, whatever the attempt deadlines.
func TestProcessModelBudget(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir(), "--model", "script:"+writeScript(t, boundaryScript),
		"--model-turn-budget", "300ms", "--model-first-event-timeout", "1h", "--model-attempt-timeout", "1h")
	ctx := testCtx(t)
	frames := turnFramesOf(t, ctx, d, "silent", nil)
	if len(frames) < 2 {
		t.Fatalf("frames %v", frames)
	}
	e, ok := frames[len(frames)-2].Payload.(protocol.ErrorPayload)
	if !ok || e.Error.Code != protocol.ModelFailure || e.Error.Details["limit"] != "model_time_per_turn" {
		t.Fatalf("a silent model's turn ended with %+v", frames[len(frames)-2].Payload)
	}
}
