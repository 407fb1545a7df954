package coordinator_test

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/testutil"
)

// largeTurnFrames is how many frames the large turn holds: enough that
// building its model context frame by frame without heed to the shutdown
// outlasts any grace by far.
const largeTurnFrames = 100_000

// appendBulk appends n short assistant text frames to a turn directly
// through the store, in big batches, as a pipelined bulk writer does.
func (e *engine) appendBulk(convID, requestID string, n int) {
	e.t.Helper()
	frame := store.NewFrame{Payload: protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.",
		Format: "markdown", Role: protocol.RoleAssistant}}
	const batch = 5000
	frames := make([]store.NewFrame, 0, batch)
	for n > 0 {
		k := min(n, batch)
		frames = frames[:0]
		for range k {
			frames = append(frames, frame)
		}
		if _, err := e.db.AppendFrames(e.ctx(), store.AppendFramesParams{ConversationID: convID, RequestID: requestID,
			Frames: frames, Now: e.clock.Now()}); err != nil {
			e.t.Fatal(err)
		}
		n -= k
	}
}

// TestShutdownHonoursGraceWithLargeClaimedTurn: a daemon that claimed a
// queued turn of very many frames and is building its model context
// from them stops within its grace when shut down (the old context
// builder ignored the shutdown and held it for minutes), and the turn ends
// with exactly one done.
func TestShutdownHonoursGraceWithLargeClaimedTurn(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 1, 20*time.Millisecond)
	_, queuedConv, queued := e.busyAndQueued()
	e.appendBulk(queuedConv, queued.RequestID, largeTurnFrames)
	b := e.peerWith("b", 1, func(c *coordinator.Config) { c.ShutdownGrace = time.Millisecond })
	e.waitTurn(queued.RequestID, func(t store.Turn) bool { return t.Status == store.TurnRunning && t.Owner == "b" })

	stopped := goDo(func() { b.Shutdown(e.ctx()) })
	select {
	case <-stopped:
	case <-time.After(testutil.Patience): // a safety net: with the fix it returns at once
		t.Fatal("the daemon's shutdown did not return: a step ignores it")
	}
	got := e.waitTurn(queued.RequestID, func(t store.Turn) bool { return t.Status.Terminal() })
	if got.Status != store.TurnFailed {
		t.Fatalf("the claimed turn ended %s, want failed (the daemon stopped)", got.Status)
	}
	dones, err := e.db.CountFrames(e.ctx(), store.CountFramesParams{ConversationID: queuedConv, RequestID: queued.RequestID,
		Type: protocol.FrameDone})
	if err != nil || dones != 1 {
		t.Fatalf("the claimed turn has %d done frames (%v), want 1", dones, err)
	}
}
