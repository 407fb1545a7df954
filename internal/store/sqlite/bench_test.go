package sqlite

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// BenchmarkGroupCommit measures durable appends (one frame per
// AppendFrames, each acknowledged only after its fsync) by 1, 16 and 256
// concurrent appenders, each with a conversation and an active turn of its
// own: the case group commit is for.
func BenchmarkGroupCommit(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("appenders=%d", n), func(b *testing.B) {
			s := mustOpen(b)
			convs := storetest.ActiveTurns(b, s, n, storetest.Epoch)
			frame := []store.NewFrame{{Payload: protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: "assistant"}}}
			var next atomic.Int64
			cpu0 := cpuTime()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, c := range convs {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, err := s.AppendFrames(b.Context(), store.AppendFramesParams{ConversationID: c.ConversationID, RequestID: c.RequestID,
							Frames: frame, Now: storetest.Epoch}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			// CPU per append: what the machine's other load cannot blur.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/append")
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
