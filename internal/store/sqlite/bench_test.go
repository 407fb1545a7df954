package sqlite

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// BenchmarkGroupCommit measures durable appends (one frame per
// AppendFrames, each acknowledged only after its fsync) by 1, 16, 256 and
// 1 000 concurrent appenders (and 100), each with a conversation and an active turn
// of its own: the case group commit, and the merging of a batch's appends
// into shared statements, are for. The bytes= runs append 8 KiB frames.
func BenchmarkGroupCommit(b *testing.B) {
	line := "a line of model output of ordinary length, streamed."
	for _, c := range []struct{ appenders, bytes int }{{1, 0}, {16, 0}, {100, 0}, {256, 0}, {1000, 0}, {100, 8192}} {
		name := fmt.Sprintf("appenders=%d", c.appenders)
		text := line
		if c.bytes > 0 {
			name += fmt.Sprintf("/bytes=%d", c.bytes)
			text += strings.Repeat("x", c.bytes-len(line))
		}
		b.Run(name, func(b *testing.B) { benchAppends(b, mustOpen(b), c.appenders, text) })
	}
}

// benchAppends runs BenchmarkGroupCommit's appends on s: appenders
// conversations with an active turn each, one frame of text per
// AppendFrames, b.N in all.
func benchAppends(b *testing.B, s *Store, appenders int, text string) {
	benchAppendsOn(b, s, storetest.ActiveTurns(b, s, appenders, storetest.Epoch), text)
}

func benchAppendsOn(b *testing.B, s *Store, convs []storetest.ActiveTurn, text string) {
	frame := []store.NewFrame{{Payload: protocol.TextPayload{Content: text, Format: "markdown", Role: "assistant"}}}
	var batches batchCounter
	s.Observe(&batches)
	var next atomic.Int64
	cpu0, io0 := testutil.ProcessCPU(), procIO()
	w0, os0 := walWrites(s.walPath())
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
	b.StopTimer()
	s.Observe(nil)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	// CPU per append: what the machine's other load cannot blur.
	b.ReportMetric(float64((testutil.ProcessCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/append")
	if n := batches.n.Load(); n > 0 {
		b.ReportMetric(float64(batches.txns.Load())/float64(n), "appends/commit")
		b.ReportMetric(float64(b.N)/float64(n), "frames/commit")
		// The WAL's writes per commit: SQLite's, and what reached the OS.
		w1, os1 := walWrites(s.walPath())
		b.ReportMetric(float64(w1-w0)/float64(n), "wal-writes/commit")
		b.ReportMetric(float64(os1-os0)/float64(n), "wal-os-writes/commit")
	}
	// The WAL's size: its file keeps the most it ever held.
	if fi, err := os.Stat(s.path + "-wal"); err == nil {
		b.ReportMetric(float64(fi.Size())/(1<<20), "wal-max-MiB")
	}
	// Write amplification: what the process handed write(2) and what
	// reached the block layer, per byte of frame text appended.
	if io1 := procIO(); io1.ok && io0.ok {
		payload := float64(b.N) * float64(len(text))
		b.ReportMetric(float64(io1.wchar-io0.wchar)/payload, "written/payload-byte")
		b.ReportMetric(float64(io1.writeBytes-io0.writeBytes)/payload, "disk/payload-byte")
	}
}

// ioCounters are this process's I/O counters from /proc/self/io.
type ioCounters struct {
	wchar, writeBytes, rchar int64
	ok                       bool
}

func procIO() ioCounters {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return ioCounters{}
	}
	var c ioCounters
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "wchar":
			c.wchar = n
		case "rchar":
			c.rchar = n
		case "write_bytes":
			c.writeBytes, c.ok = n, true
		}
	}
	return c
}

// batchCounter counts the writer loop's batches and their transactions.
type batchCounter struct{ n, txns atomic.Int64 }

func (c *batchCounter) StoreOperation(string, time.Duration) {}
func (c *batchCounter) WriterQueueWait(time.Duration)        {}
func (c *batchCounter) WriterBatch(size int) {
	c.n.Add(1)
	c.txns.Add(int64(size))
}

// BenchmarkGroupCommitGrown is BenchmarkGroupCommit's 1 000 appenders on a
// database that already holds 200 frames in every conversation, as a
// daemon's does after a while: each append then lands on an index page of
// its own, and the pages a batch touches outgrow a small page cache.
func BenchmarkGroupCommitGrown(b *testing.B) {
	s := mustOpen(b)
	convs := storetest.ActiveTurns(b, s, 1000, storetest.Epoch)
	fill := make([]store.NewFrame, 200)
	for i := range fill {
		fill[i] = store.NewFrame{Payload: protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: "assistant"}}
	}
	var wg sync.WaitGroup
	for _, c := range convs {
		wg.Go(func() {
			if _, err := s.AppendFrames(b.Context(), store.AppendFramesParams{ConversationID: c.ConversationID, RequestID: c.RequestID,
				Frames: fill, Now: storetest.Epoch}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	io0 := procIO()
	benchAppendsOn(b, s, convs, "a line of model output of ordinary length, streamed.")
	// Pages the writer's cache missed are read back (pread): what its
	// size decides.
	if io1 := procIO(); io1.ok && io0.ok {
		b.ReportMetric(float64(io1.rchar-io0.rchar)/float64(b.N), "read-bytes/append")
	}
}
