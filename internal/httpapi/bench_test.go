package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// BenchmarkStreamReplay measures replay throughput over real HTTP/SSE: a
// 20 000-frame conversation streamed from cursor 0, decoded strictly.
func BenchmarkStreamReplay(b *testing.B) {
	h := newHarness(b, harnessOpts{})
	ctx := context.Background()
	conv, err := h.store.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	const total = 20_000
	rid := uuid.NewString()
	if _, _, err := h.store.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: conv.ID, RequestID: rid, Instruction: "x",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: time.Now()}); err != nil {
		b.Fatal(err)
	}
	batch := make([]store.NewFrame, 500)
	for i := range batch {
		batch[i] = store.NewFrame{Payload: protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: "assistant"}}
	}
	for n := 1; n < total; n += len(batch) {
		if _, err := h.store.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv.ID, RequestID: rid, Frames: batch, Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	last, _ := h.store.GetConversation(ctx, conv.ID)
	b.ResetTimer()
	for b.Loop() {
		n := 0
		err := h.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
			n++
			if f.Sequence == last.LastSequence() {
				return errStop
			}
			return nil
		})
		if err != nil && err != errStop {
			b.Fatal(err)
		}
		if int64(n) != last.LastSequence() {
			b.Fatalf("streamed %d frames", n)
		}
	}
	b.ReportMetric(float64(last.LastSequence())*float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}
