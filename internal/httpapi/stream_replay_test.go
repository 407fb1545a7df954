package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// TestStreamReplayAcrossPages: a conversation of several replay pages
// (the stream reads 500 frames at a time, the next page while it writes
// one) streams from any cursor, before, at and after a page's edge, every
// frame once and in order, each event byte for byte the frame's encoding,
// and then the live frames after them, none twice.
func TestStreamReplayAcrossPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	convID, rid, _ := h.activeTurn()
	// Frames of several sizes: the stream's writes end inside events.
	for _, size := range []int{10, 3000, 200, 1, 700} {
		h.appendText(convID, rid, 330, size)
	}
	frames := h.storedFrames(convID, 0)
	last := frames[len(frames)-1].Sequence
	if last != 1651 || int64(len(frames)) != last {
		t.Fatalf("%d frames, the last %d; want 1 651", len(frames), last)
	}
	for _, after := range []int64{0, 1, 499, 500, 501, 999, 1000, 1001, 1500, last - 1, last} {
		t.Run(fmt.Sprint("after=", after), func(t *testing.T) {
			rs := h.openRawSize(convID, after, 64<<10)
			defer rs.conn.Close()
			rs.wantEvents(t, frames[after:])
			if after != 0 {
				return
			}
			// The live tail follows the replay, from the next frame on.
			live := h.appendText(convID, rid, 3, 50)
			want := make([]store.Frame, len(live))
			copy(want, live)
			rs.wantEvents(t, want)
			frames = append(frames, live...)
			last = frames[len(frames)-1].Sequence
		})
	}
}

// storedFrames reads a conversation's frames after a cursor from the
// store, a page at a time.
func (h *harness) storedFrames(convID string, after int64) []store.Frame {
	h.t.Helper()
	var all []store.Frame
	for {
		fs, err := h.store.ListFrames(context.Background(), store.ListFramesParams{ConversationID: convID, AfterSequence: after, Limit: 500})
		if err != nil {
			h.t.Fatal(err)
		}
		if len(fs) == 0 {
			return all
		}
		all = append(all, fs...)
		after = fs[len(fs)-1].Sequence
	}
}

// wantEvents reads the stream's next events, skipping comments, and fails
// unless they are want's frames in order, each exactly as AppendSSE
// encodes it.
func (rs *rawStream) wantEvents(t *testing.T, want []store.Frame) {
	t.Helper()
	_ = rs.conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // a safety net only
	var block []byte
	for i := 0; i < len(want); {
		line, err := rs.r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %d of %d events: %v", i, len(want), err)
		}
		block = append(block, line...)
		if len(line) > 1 {
			continue // the event goes on
		}
		if len(block) == 1 || bytes.HasPrefix(block, []byte(":")) && !bytes.Contains(block, []byte("\nid: ")) && !bytes.Contains(block, []byte("\ndata: ")) {
			block = block[:0] // the end of the opening, or a comment (status, heartbeat)
			continue
		}
		wantSSE, err := protocol.AppendSSE(nil, want[i].Wire())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(block, wantSSE) {
			t.Fatalf("event %d: got\n%.300q\nwant frame %d:\n%.300q", i, block, want[i].Sequence, wantSSE)
		}
		block = block[:0]
		i++
	}
}
