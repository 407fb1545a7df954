package coordinator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/testutil"
)

// largeTurnFrames is how many frames the large turn holds: more than one
// page of its reads, so that building its model context reads again after
// the first page.
const largeTurnFrames = 2 * coordinator.TurnPage

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
// queued turn of many frames and is building its model context from them
// stops within its grace when shut down (the old context builder ignored
// the shutdown and held it for as long as the reads took), and the turn
// ends with exactly one done. The reads after the first page never finish
// of themselves: only the end of the turn's context lets them go.
func TestShutdownHonoursGraceWithLargeClaimedTurn(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 1, 20*time.Millisecond)
	_, queuedConv, queued := e.busyAndQueued()
	e.appendBulk(queuedConv, queued.RequestID, largeTurnFrames)
	reads := &heldReads{requestID: queued.RequestID, held: make(chan struct{}), test: t.Context()}
	b := e.peerWith("b", 1, func(c *coordinator.Config) {
		c.ShutdownGrace = time.Millisecond
		reads.Store = c.Store
		c.Store = reads
	})
	select {
	case <-reads.held:
	case <-time.After(testutil.Patience): // a safety net
		t.Fatal("b never read the claimed turn's second page")
	}

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

// heldReads holds every read of one turn's frames after the first page
// until the read's context ends (or the test does): reads as slow as a
// turn of very many frames makes them, without writing that many.
type heldReads struct {
	store.Store
	requestID string
	held      chan struct{} // closed when the first read is held
	once      sync.Once
	test      context.Context
}

func (s *heldReads) ListFrames(ctx context.Context, p store.ListFramesParams) ([]store.Frame, error) {
	if p.RequestID != s.requestID || p.AfterSequence == 0 {
		return s.Store.ListFrames(ctx, p)
	}
	s.once.Do(func() { close(s.held) })
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.test.Done():
		return nil, s.test.Err()
	}
}
