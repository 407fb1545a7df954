package coordinator

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
)

// BenchmarkTurnContext measures building the model messages of a claimed
// turn of n short text frames (as a pipelined bulk writer leaves them)
// from a real SQLite store. whole is how it was done before: every frame
// of the turn read and held, then each frame's text appended to the
// message's string; paged is turnMessages. peak-live-B is the live heap
// above the start, sampled after a GC at each page (paged) or once the
// frames are all read (whole): what the claiming daemon holds.
func BenchmarkTurnContext(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		st, turn := benchTurnStore(b, n)
		c := &Coordinator{store: st}
		for _, how := range []string{"whole", "paged"} {
			b.Run(fmt.Sprintf("frames=%d/%s", n, how), func(b *testing.B) {
				b.ReportAllocs()
				var peak uint64
				for b.Loop() {
					base := liveHeap()
					sample := func() { peak = max(peak, liveHeap()-min(base, liveHeap())) }
					var msgs []model.Message
					var err error
					if how == "whole" {
						msgs, err = wholeTurnMessages(b.Context(), c, turn, sample)
					} else {
						msgs, err = pagedTurnMessages(b.Context(), c, turn, sample)
					}
					if err != nil || len(msgs) == 0 || len(msgs[len(msgs)-1].Content) != n*len(benchLine) {
						b.Fatalf("%d messages, %v", len(msgs), err)
					}
				}
				b.ReportMetric(float64(peak), "peak-live-B")
			})
		}
		st.Close()
	}
}

// benchLine is one streamed frame's text.
const benchLine = "a line of model output of ordinary length, streamed."

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// benchTurnStore is a store with one running turn of an instruction and
// n assistant text frames.
func benchTurnStore(b testing.TB, n int) (*sqlite.Store, store.Turn) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "studio.db"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Migrate(b.Context(), storetest.Epoch); err != nil {
		b.Fatal(err)
	}
	t := storetest.ActiveTurns(b, st, 1, storetest.Epoch)[0]
	frames := make([]store.NewFrame, n)
	for i := range frames {
		frames[i] = store.NewFrame{Payload: protocol.TextPayload{Content: benchLine, Format: "markdown", Role: protocol.RoleAssistant}}
	}
	if _, err := st.AppendFrames(b.Context(), store.AppendFramesParams{ConversationID: t.ConversationID, RequestID: t.RequestID,
		Frames: frames, Now: storetest.Epoch}); err != nil {
		b.Fatal(err)
	}
	turn, err := st.GetTurn(b.Context(), t.RequestID)
	if err != nil {
		b.Fatal(err)
	}
	return st, turn
}

// pagedTurnMessages is turnMessages, sampling the heap at each page.
func pagedTurnMessages(ctx context.Context, c *Coordinator, t store.Turn, sample func()) ([]model.Message, error) {
	var mb messageBuilder
	n := 0
	err := c.scanTurn(ctx, t, func(f store.Frame) bool {
		if n++; n%turnPage == 0 {
			sample()
		}
		mb.add(f)
		return true
	})
	return mb.done(), err
}

// wholeTurnMessages is how a turn's messages were built before: all its
// frames read first, then each assistant text appended to a string.
func wholeTurnMessages(ctx context.Context, c *Coordinator, t store.Turn, sample func()) ([]model.Message, error) {
	var frames []store.Frame
	err := c.scanTurn(ctx, t, func(f store.Frame) bool {
		frames = append(frames, f)
		return true
	})
	if err != nil {
		return nil, err
	}
	sample()
	var msgs []model.Message
	for _, f := range frames {
		p, err := protocol.DecodePayload(f.Type, f.Payload)
		if err != nil {
			continue
		}
		if v, ok := p.(protocol.TextPayload); ok {
			if v.Role == protocol.RoleUser || len(msgs) == 0 || msgs[len(msgs)-1].Role != model.RoleAssistant {
				role := model.RoleAssistant
				if v.Role == protocol.RoleUser {
					role = model.RoleUser
				}
				msgs = append(msgs, model.Message{Role: role, Content: v.Content})
				continue
			}
			msgs[len(msgs)-1].Content += v.Content
		}
	}
	runtime.KeepAlive(frames)
	return msgs, nil
}
