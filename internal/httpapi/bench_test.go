package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/postgres"
	"github.com/studio/operator/internal/store/postgres/pgtest"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
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
		start, after, cpu := time.Now(), int64(0), testutil.ProcessCPU()
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
		readCPU += testutil.ProcessCPU() - cpu
		if after != last {
			b.Fatalf("read to %d of %d", after, last)
		}
		runtime.ReadMemStats(&ms)
		m0 := ms.Mallocs
		start, cpu = time.Now(), testutil.ProcessCPU()
		rs := h.openRawSize(convID, 0, 64<<10)
		if err := rs.untilID(0, last); err != nil {
			b.Fatal(err)
		}
		sseTime += time.Since(start)
		sseCPU += testutil.ProcessCPU() - cpu
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
			cpu0 := testutil.ProcessCPU()
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
			b.ReportMetric(float64(testutil.ProcessCPU()-cpu0)/float64(time.Microsecond)/float64(n*b.N), "cpu-µs/delivery")
			b.ReportMetric(float64(h.reads.n.Load()-reads0)/float64(b.N), "db-reads/frame")
		})
	}
}

// BenchmarkIdleStreams measures what an idle stream costs the server, on
// each backend: 2 000 streams (of 200 conversations) opened and left idle
// through heartbeats. KiB/stream is the growth of the Go heap and stacks
// in use after a GC, per stream (client sockets and the store's
// connections included, so it errs high); goroutines/stream the growth
// of the goroutines; db-calls/idle the reads they made while idle. On
// PostgreSQL a stream must cost what it costs on SQLite: the store's one
// listening connection feeds every stream, and no stream holds a
// connection, a LISTEN or a poll of its own.
func BenchmarkIdleStreams(b *testing.B) {
	b.Run("backend=sqlite", func(b *testing.B) { benchIdleStreams(b, func(testing.TB) store.Store { return nil }) })
	b.Run("backend=postgres", func(b *testing.B) {
		srv := pgtest.New(b)
		benchIdleStreams(b, func(tb testing.TB) store.Store {
			st, err := postgres.Open(tb.Context(), srv.NewDatabase(tb, ""))
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { st.Close() })
			if _, err := st.Migrate(tb.Context(), time.Now()); err != nil {
				tb.Fatal(err)
			}
			return st
		})
	})
}

// benchIdleStreams is BenchmarkIdleStreams on the store open returns (nil:
// the harness's SQLite file).
func benchIdleStreams(b *testing.B, open func(testing.TB) store.Store) {
	const streams, convs = 2000, 200
	for b.Loop() {
		b.StopTimer()
		h := newHarness(b, harnessOpts{heartbeat: 50 * time.Millisecond, db: open(b)})
		ids := make([]string, convs)
		for i, a := range storetest.ActiveTurns(b, h.reads.Store, convs, time.Now()) {
			// Running, as in activeTurn: no worker claims it.
			if _, err := h.reads.StartTurn(b.Context(), store.StartTurnParams{RequestID: a.RequestID, Now: time.Now()}); err != nil {
				b.Fatal(err)
			}
			ids[i] = a.ConversationID
		}
		before, goroutines := inUse(), runtime.NumGoroutine()
		b.StartTimer()
		conns := make([]*rawStream, streams)
		for i := range conns {
			conns[i] = h.openRaw(ids[i%convs], 1)
		}
		b.StopTimer()
		for _, rs := range conns { // each has replayed and waits
			if err := rs.until(": heartbeat"); err != nil {
				b.Fatal(err)
			}
		}
		reads := h.reads.n.Load()
		for _, rs := range conns[:10] { // a few more heartbeats go by
			for range 2 {
				if err := rs.until(": heartbeat"); err != nil {
					b.Fatal(err)
				}
			}
		}
		after := inUse()
		b.ReportMetric(float64(after-before)/1024/streams, "KiB/stream")
		b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/streams, "goroutines/stream")
		b.ReportMetric(float64(h.reads.n.Load()-reads), "db-calls/idle")
		for _, rs := range conns {
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

// BenchmarkFanOutLatency measures frame -> client latency over real
// HTTP/SSE under the load of `studio bench`'s 1 000 streams x 2 000/s:
// streams=1000/per=10 is 100 conversations with 10 streams each, every
// conversation appending one frame each 50 ms; streams=1000/per=1 is the
// goals' shape, 1 000 conversations with a stream each, a frame each
// 500 ms. Each append waits for its commit as a turn's appender does. One
// iteration is one such round on every conversation. A frame's latency is
// from its createdAt (set before the append is handed to the store) to
// the line's read by its client, so it holds the wait for the group
// commit, the commit, the feed's wake-up, the stream's turn on the
// processor and its socket write; commit-p50/p99 are the first part
// alone, from createdAt to the append's return, after the commit.
func BenchmarkFanOutLatency(b *testing.B) {
	for _, c := range []struct {
		convs, perConv int
		every          time.Duration
	}{{100, 10, 50 * time.Millisecond}, {1000, 1, 500 * time.Millisecond}} {
		b.Run(fmt.Sprintf("streams=%d/per=%d", c.convs*c.perConv, c.perConv), func(b *testing.B) {
			benchFanOutLatency(b, c.convs, c.perConv, c.every)
		})
	}
}

func benchFanOutLatency(b *testing.B, convs, perConv int, every time.Duration) {
	h := newHarness(b, harnessOpts{})
	type conv struct {
		id, rid string
		last    int64
	}
	cs := make([]conv, 0, convs)
	for len(cs) < convs {
		// A turn the coordinator took to run before it was started here
		// is left to it: the bench appends to turns of its own.
		a := storetest.ActiveTurns(b, h.store, 1, time.Now())[0]
		if _, err := h.store.StartTurn(b.Context(), store.StartTurnParams{RequestID: a.RequestID, Now: time.Now()}); err != nil {
			continue
		}
		cs = append(cs, conv{a.ConversationID, a.RequestID, 1})
	}
	lat := make([][]time.Duration, convs*perConv)
	var readers sync.WaitGroup
	for i := range lat {
		rs := h.openRaw(cs[i/perConv].id, cs[i/perConv].last)
		readers.Go(func() {
			_ = rs.conn.SetReadDeadline(time.Now().Add(10 * time.Minute)) // a safety net only
			for seen := 0; seen < b.N; {
				line, err := rs.r.ReadSlice('\n')
				if err != nil {
					b.Error(err)
					return
				}
				now := time.Now()
				data, ok := bytes.CutPrefix(line, []byte("data: "))
				if !ok {
					continue
				}
				at, ok := createdAt(data)
				if !ok {
					continue
				}
				lat[i] = append(lat[i], now.Sub(at))
				seen++
			}
		})
	}
	commits := make([][]time.Duration, convs)
	cpu0 := testutil.ProcessCPU()
	b.ResetTimer()
	var turns sync.WaitGroup
	start := time.Now()
	for c := range cs {
		turns.Go(func() {
			// The conversations' frames spread over the round, as turns
			// started at different times are.
			next := start.Add(every * time.Duration(c) / time.Duration(convs))
			for range b.N {
				time.Sleep(time.Until(next))
				f := h.appendText(cs[c].id, cs[c].rid, 1, 21)
				commits[c] = append(commits[c], time.Since(f[0].CreatedAt))
				next = next.Add(every)
			}
		})
	}
	turns.Wait()
	readers.Wait()
	b.StopTimer()
	all, commit := slices.Concat(lat...), slices.Concat(commits...)
	if len(all) == 0 {
		b.Fatal("no frame read")
	}
	slices.Sort(all)
	slices.Sort(commit)
	pct := func(d []time.Duration, p float64) float64 {
		return float64(d[min(len(d)-1, int(float64(len(d))*p))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(all, 0.50), "p50-ms")
	b.ReportMetric(pct(all, 0.99), "p99-ms")
	b.ReportMetric(pct(all, 0.999), "p999-ms")
	b.ReportMetric(pct(commit, 0.50), "commit-p50-ms")
	b.ReportMetric(pct(commit, 0.99), "commit-p99-ms")
	b.ReportMetric(float64(testutil.ProcessCPU()-cpu0)/float64(time.Microsecond)/float64(len(all)), "cpu-µs/delivery")
}

// createdAt is the frame's createdAt in an SSE data line.
func createdAt(data []byte) (time.Time, bool) {
	const key = `"createdAt":`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := data[i+len(key):]
	end := bytes.IndexAny(rest, ",}")
	if end < 0 {
		return time.Time{}, false
	}
	v, err := strconv.ParseFloat(string(rest[:end]), 64)
	if err != nil {
		return time.Time{}, false
	}
	return protocol.Time(v), true
}
