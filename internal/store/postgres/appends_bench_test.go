package postgres

import (
	"fmt"
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
// single (each append its own transaction, as before), interleaved within
// each run. pgtest's server runs with fsync off, so this measures the
// round trips and the server's work per append, not the disk; `studio
// bench --database` measures the durable rates.
//
//	go test ./internal/store/postgres -run '^$' -bench Appends -benchtime 3s -count 3
func BenchmarkAppends(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, mode := range []string{"batched", "single"} {
			b.Run(fmt.Sprintf("appenders=%d/%s", n, mode), func(b *testing.B) {
				opts := Options{}
				if mode == "single" {
					opts.appendWriters = -1
				}
				benchAppends(b, n, opts)
			})
		}
	}
}

func benchAppends(b *testing.B, n int, opts Options) {
	s := openWith(b, newDatabase(b), opts)
	turns := storetest.ActiveTurns(b, s, n, storetest.Epoch)
	frame := []store.NewFrame{{Payload: text("a line of model output of ordinary length, streamed.")}}
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
}
