package httpapi_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// BenchmarkStreamReplay measures replay throughput over real HTTP/SSE: a
// 20 000-frame conversation streamed from cursor 0, decoded strictly.
func BenchmarkStreamReplay(b *testing.B) {
	h := newHarness(b, harnessOpts{})
	convID, last := h.replayConversation(20_000)
	b.ResetTimer()
	for b.Loop() {
		n := 0
		err := h.client.Stream(context.Background(), convID, 0, func(f protocol.Frame) error {
			n++
			if f.Sequence == last {
				return errStop
			}
			return nil
		})
		if err != nil && err != errStop {
			b.Fatal(err)
		}
		if int64(n) != last {
			b.Fatalf("streamed %d frames", n)
		}
	}
	b.ReportMetric(float64(last)*float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkReplayToStoreRead measures replay over SSE against the store's
// own read of the same frames, as `studio bench` does (goal: the stream at
// 0.9 × the read or better): each iteration reads the 20 000-frame
// conversation from the store in pages of 500, then streams it over a
// loopback connection whose client only finds each event's id (in order),
// so the server's side is what is measured. ratio is the two rates of the
// same iterations; sse-allocs/frame counts the process's allocations
// (server and client) while streaming; the CPU per frame of each part
// (the process's: the stream's includes its client) is steadier than
// the rates on a loaded machine.
func BenchmarkReplayToStoreRead(b *testing.B) {
	h := newHarness(b, harnessOpts{})
	convID, last := h.replayConversation(20_000)
	ctx := context.Background()
	var readTime, sseTime, readCPU, sseCPU time.Duration
	var mallocs uint64
	var ms runtime.MemStats
	b.ResetTimer()
	for b.Loop() {
		start, after, cpu := time.Now(), int64(0), processCPU()
		for {
			fs, err := h.store.ListFrames(ctx, store.ListFramesParams{ConversationID: convID, AfterSequence: after, Limit: 500})
			if err != nil {
				b.Fatal(err)
			}
			if len(fs) == 0 {
				break
			}
			after = fs[len(fs)-1].Sequence
		}
		readTime += time.Since(start)
		readCPU += processCPU() - cpu
		if after != last {
			b.Fatalf("read to %d of %d", after, last)
		}
		runtime.ReadMemStats(&ms)
		m0 := ms.Mallocs
		start, cpu = time.Now(), processCPU()
		rs := h.openRawSize(convID, 0, 64<<10)
		if err := rs.untilID(0, last); err != nil {
			b.Fatal(err)
		}
		sseTime += time.Since(start)
		sseCPU += processCPU() - cpu
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - m0
		rs.conn.Close()
	}
	frames := float64(last) * float64(b.N)
	b.ReportMetric(frames/sseTime.Seconds(), "frames/s")
	b.ReportMetric(frames/readTime.Seconds(), "read-frames/s")
	b.ReportMetric(readTime.Seconds()/sseTime.Seconds(), "ratio")
	b.ReportMetric(float64(mallocs)/frames, "sse-allocs/frame")
	b.ReportMetric(float64(sseCPU)/float64(time.Microsecond)/frames, "sse-cpu-µs/frame")
	b.ReportMetric(float64(readCPU)/float64(time.Microsecond)/frames, "read-cpu-µs/frame")
}

// replayConversation writes a conversation of n frames (the first its
// turn's request) of the text `studio bench` replays, straight to the
// store; last is its last sequence.
func (h *harness) replayConversation(n int) (convID string, last int64) {
	h.t.Helper()
	convID, rid, _ := h.activeTurn()
	batch := make([]store.NewFrame, 500)
	for i := range batch {
		batch[i] = store.NewFrame{Payload: protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: "assistant"}}
	}
	for written := 1; written < n; written += len(batch) {
		if _, err := h.store.AppendFrames(context.Background(), store.AppendFramesParams{ConversationID: convID, RequestID: rid,
			Frames: batch[:min(len(batch), n-written)], Now: time.Now()}); err != nil {
			h.t.Fatal(err)
		}
	}
	conv, err := h.store.GetConversation(context.Background(), convID)
	if err != nil {
		h.t.Fatal(err)
	}
	return convID, conv.LastSequence()
}

// BenchmarkFanOut measures live delivery over real HTTP/SSE: one
// conversation, 1, 100 or 1 000 streams reading, b.N frames appended one
// per commit; a frame counts once every stream has it.
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			h := newHarness(b, harnessOpts{})
			convID, rid, last := h.activeTurn()
			streams := make([]*rawStream, n)
			for i := range streams {
				streams[i] = h.openRaw(convID, last)
			}
			reads0 := h.reads.n.Load()
			cpu0 := processCPU()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, rs := range streams {
				wg.Go(func() {
					if err := rs.untilID(last, last+int64(b.N)); err != nil {
						b.Error(err)
					}
				})
			}
			for range b.N {
				h.appendText(convID, rid, 1, 200)
			}
			wg.Wait()
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
			// The process's CPU (server, store and the reading clients)
			// per delivery: steadier than rates on a shared machine.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(n*b.N), "cpu-µs/delivery")
			b.ReportMetric(float64(h.reads.n.Load()-reads0)/float64(b.N), "db-reads/frame")
		})
	}
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleStreams measures what an idle stream costs the server:
// 2 000 streams (of 200 conversations) opened and left idle through
// heartbeats. KiB/stream is the growth of the Go heap and stacks in use
// after a GC, per stream (client sockets included, so it errs high);
// db-calls/idle is the reads they made while idle.
func BenchmarkIdleStreams(b *testing.B) {
	const streams, convs = 2000, 200
	for b.Loop() {
		b.StopTimer()
		h := newHarness(b, harnessOpts{heartbeat: 50 * time.Millisecond})
		ids := make([]string, convs)
		for i := range ids {
			ids[i], _, _ = h.activeTurn()
		}
		before := inUse()
		b.StartTimer()
		open := make([]*rawStream, streams)
		for i := range open {
			open[i] = h.openRaw(ids[i%convs], 1)
		}
		b.StopTimer()
		for _, rs := range open { // each has replayed and waits
			if err := rs.until(": heartbeat"); err != nil {
				b.Fatal(err)
			}
		}
		reads := h.reads.n.Load()
		for _, rs := range open[:10] { // a few more heartbeats go by
			for range 2 {
				if err := rs.until(": heartbeat"); err != nil {
					b.Fatal(err)
				}
			}
		}
		after := inUse()
		b.ReportMetric(float64(after-before)/1024/streams, "KiB/stream")
		b.ReportMetric(float64(h.reads.n.Load()-reads), "db-calls/idle")
		for _, rs := range open {
			rs.conn.Close()
		}
		b.StartTimer()
	}
}

// inUse is the heap and the goroutine stacks in use, after a GC.
func inUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}
