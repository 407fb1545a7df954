package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

// Turns sent while another runs (whenBusy), through the built binary: a
// waiting turn outlives kill -9 of its daemon, alone on SQLite and with
// two daemons on PostgreSQL, and the CLI sends with --when-busy.

// submitWhen submits a turn at the conversation's current end that waits
// behind the active one (or interrupts it).
func submitWhen(tb testing.TB, ctx context.Context, d *daemon, convID, instruction string, w protocol.WhenBusy) protocol.TurnAccepted {
	tb.Helper()
	page, err := d.client.GetConversation(ctx, convID, 0, 1)
	if err != nil {
		tb.Fatal(err)
	}
	last := page.LatestSequence
	acc, err := d.client.SubmitTurn(ctx, convID, protocol.TurnRequest{Instruction: instruction, WhenBusy: w,
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
	if err != nil {
		tb.Fatalf("submit %q (%s) on %s: %v", instruction, w, d.URL, err)
	}
	return acc
}

// checkTurns checks that the frames hold the turns in this order, each one
// unbroken run of frames ending in its one done, with these outcomes.
func checkTurns(tb testing.TB, l *frameLog, want ...any) {
	tb.Helper()
	frames := l.all()
	i := 0
	for k := 0; k < len(want); k += 2 {
		rid, out := want[k].(string), want[k+1].(protocol.Outcome)
		start := i
		for i < len(frames) && frames[i].RequestID == rid {
			i++
		}
		if i == start || frames[i-1].Type != protocol.FrameDone || outcome(frames[i-1]) != out {
			tb.Fatalf("turn %d (%s) is not one run of frames ending done(%s): %s", k/2+1, rid, out, l.describe())
		}
		for _, f := range frames[start : i-1] {
			if f.Type == protocol.FrameDone {
				tb.Fatalf("turn %s has two done frames: %s", rid, l.describe())
			}
		}
	}
	if i != len(frames) {
		tb.Fatalf("frames after the last turn: %s", l.describe())
	}
}

// TestProcessKill9WithAWaitingTurn: kill -9 of a daemon alone with its
// SQLite file while a turn runs and another waits behind it. The next
// start fails the running one (service_restarted) and runs the waiting
// one, which completes: one done each, in order.
func TestProcessKill9WithAWaitingTurn(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	scriptPath := writeScript(t, slowScript)
	d := startDaemon(t, dataDir, "--model", "script:"+scriptPath)
	ctx := testCtx(t)
	conv := newConversation(t, ctx, d)
	l := follow(t, d, conv.ID, 0)
	slow := submit(t, ctx, d, conv.ID, "slow")
	l.waitFor(t, ctx, "the turn running", textIs("thinking"))
	next := submitWhen(t, ctx, d, conv.ID, "hello", protocol.WhenBusyEnqueue)
	if next.Waiting != 1 {
		t.Fatalf("accepted %+v, want first in line", next)
	}
	d.kill()
	<-d.exited

	d2 := startDaemon(t, dataDir, "--model", "script:"+scriptPath)
	l2 := follow(t, d2, conv.ID, 0)
	l2.waitFor(t, ctx, "the waiting turn's done", doneOf(next.RequestID))
	checkTurns(t, l2, slow.RequestID, protocol.OutcomeFailed, next.RequestID, protocol.OutcomeCompleted)
}

// TestProcessClusterWaitingTurnAfterKill9: two daemons on PostgreSQL. A
// runs a turn; a turn sent to B waits behind it; A is killed. B reaps A's
// turn, which makes the waiting turn active, and runs it: one done each.
func TestProcessClusterWaitingTurnAfterKill9(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "--model", "script:"+writeScript(t, slowScript))
	a, b := c.ds[0], c.ds[1]
	ctx := testCtx(t)
	conv, slow, onB := slowTurn(t, ctx, a, b)
	next := submitWhen(t, ctx, b, conv.ID, "hello", protocol.WhenBusyEnqueue)
	if next.Waiting != 1 {
		t.Fatalf("accepted %+v, want first in line", next)
	}
	a.kill()
	<-a.exited
	onB.waitFor(t, ctx, "the waiting turn's done", doneOf(next.RequestID))
	checkTurns(t, onB, slow.RequestID, protocol.OutcomeFailed, next.RequestID, protocol.OutcomeCompleted)
	if n := c.count(ctx, `SELECT COUNT(*) FROM studio_operator_frames WHERE request_id = $1 AND frame_type = 'done'`, next.RequestID); n != 1 {
		t.Fatalf("%d done frames for the waiting turn", n)
	}
}

// TestProcessSendWhenBusy: studio operator send while a turn runs is
// refused (exit 4) unless --when-busy says otherwise; with enqueue it
// waits, says so, and prints the reply once the running turn ends; with
// interrupt it cancels the running turn and runs.
func TestProcessSendWhenBusy(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, "--model", "script:"+writeScript(t, slowScript))
	c := newCLIRunner(t, d, dataDir)
	ctx := testCtx(t)
	conv := newConversation(t, ctx, d)
	l := follow(t, d, conv.ID, 0)
	slow := submit(t, ctx, d, conv.ID, "slow")
	l.waitFor(t, ctx, "the turn running", textIs("thinking"))

	c.run(exitConflict, "operator", "send", "--conversation", conv.ID, "hello")
	c.run(exitUsage, "operator", "send", "--conversation", conv.ID, "--when-busy", "later", "hello")

	var wg sync.WaitGroup
	var out, errOut string
	var code int
	wg.Go(func() {
		out, errOut, code = runStudio(t, c.env, "operator", "send", "--conversation", conv.ID, "--when-busy", "enqueue", "hello after")
	})
	testutil.Eventually(t, func() bool {
		page, err := d.client.GetConversation(ctx, conv.ID, 0, 1)
		return err == nil && page.ActiveTurn != nil && len(page.ActiveTurn.Waiting) == 1
	}, "the CLI's turn waiting")
	if _, err := d.client.Cancel(ctx, conv.ID, slow.RequestID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if code != exitOK || !strings.Contains(out, "Hello") || !strings.Contains(errOut, "waits behind the running turn (number 1 in line)") {
		t.Fatalf("send --when-busy enqueue: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	slow2 := submit(t, ctx, d, conv.ID, "slow")
	l.waitFor(t, ctx, "the second slow turn running", func(f protocol.Frame) bool {
		return f.RequestID == slow2.RequestID && textIs("thinking")(f)
	})
	out, _ = c.run(exitOK, "operator", "send", "--conversation", conv.ID, "--when-busy", "interrupt", "instead")
	if !strings.Contains(out, "Hello") {
		t.Fatalf("send --when-busy interrupt: %s", out)
	}
	if f := l.waitFor(t, ctx, "the interrupted turn's done", doneOf(slow2.RequestID)); outcome(f) != protocol.OutcomeCancelled {
		t.Fatalf("the interrupted turn ended %s", f.Payload)
	}
}
