package coordinator

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
)

// BenchmarkAppender measures one turn's frames through its appender into
// a real SQLite store (synchronous=FULL): the turn queues each frame and
// goes on, as a turn's owner emits; appends/frame is how many commits the
// frames took. It ends when every frame is durable. sync=true is the turn
// waiting for each frame's commit before the next: no pipelining.
func BenchmarkAppender(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			st, err := sqlite.Open(filepath.Join(b.TempDir(), "studio.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Migrate(b.Context(), storetest.Epoch); err != nil {
				b.Fatal(err)
			}
			turn := storetest.ActiveTurns(b, st, 1, storetest.Epoch)[0]
			var appends atomic.Int64
			a := newAppender(func(ctx context.Context, payloads []protocol.Payload) error {
				frames := make([]store.NewFrame, len(payloads))
				for i, p := range payloads {
					frames[i] = store.NewFrame{Payload: p}
				}
				appends.Add(1)
				_, err := st.AppendFrames(ctx, store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID,
					Frames: frames, Now: storetest.Epoch})
				return err
			}, func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Minute)
			})
			frame := []protocol.Payload{protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: protocol.RoleAssistant}}
			for b.Loop() {
				if ok := a.push(frame); sync || !ok {
					if _, _, err := a.wait(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if _, _, err := a.wait(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
			b.ReportMetric(float64(appends.Load())/float64(b.N), "appends/frame")
		})
	}
}
