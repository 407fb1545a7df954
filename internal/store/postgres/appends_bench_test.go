package postgres

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// BenchmarkAppends times durable appends (one frame per AppendFrames) by
// 10, 100 and 1 000 turns appending at once, each to its own
// conversation: batched (the writer loops, one transaction per batch) and
// single (each append its own transaction, unbatched), interleaved within
// each run. pgtest's server runs with fsync off, so this measures the
// round trips and the server's work per append, not the disk; `studio
// bench --database` measures the durable rates.
//
//	go test ./internal/store/postgres -run '^$' -bench Appends -benchtime 3s -count 3
//
// appenders=1/frames=1000 is one turn appending 1 000 frames per call, as a
// turn whose frames pile up behind a slow commit does.
func BenchmarkAppends(b *testing.B) {
	for _, c := range []struct{ appenders, frames int }{{10, 1}, {100, 1}, {1000, 1}, {1, 1000}} {
		for _, mode := range []string{"batched", "single"} {
			b.Run(fmt.Sprintf("appenders=%d/frames=%d/%s", c.appenders, c.frames, mode), func(b *testing.B) {
				opts := Options{}
				if mode == "single" {
					opts.appendWriters = -1
				}
				benchAppends(b, c.appenders, c.frames, opts)
			})
		}
	}
}

func benchAppends(b *testing.B, n, frames int, opts Options) {
	s := openWith(b, newDatabase(b), opts)
	turns := storetest.ActiveTurns(b, s, n, storetest.Epoch)
	frame := slices.Repeat([]store.NewFrame{{Payload: text("a line of model output of ordinary length, streamed.")}}, frames)
	var left atomic.Int64
	left.Store(int64(b.N))
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, t := range turns {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if _, err := s.AppendFrames(b.Context(), store.AppendFramesParams{ConversationID: t.ConversationID, RequestID: t.RequestID,
					Frames: frame, Now: time.Now()}); err != nil {
					failed.Store(&err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(b.N*frames)/elapsed.Seconds(), "frames/s")
}
