package feed_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

func frames(conv string, from, n int64, size int) []protocol.RawFrame {
	out := make([]protocol.RawFrame, n)
	for i := range out {
		p, _ := protocol.EncodePayload(protocol.TextPayload{Content: string(bytes.Repeat([]byte{'x'}, size)), Format: "plain", Role: protocol.RoleAssistant})
		out[i] = protocol.RawFrame{Version: protocol.Version, ConversationID: conv, Sequence: from + int64(i), RequestID: "r", Type: protocol.FrameText,
			Payload: p, CreatedAt: protocol.Timestamp(time.Unix(1_700_000_000, 0))}
	}
	return out
}

// drain takes everything the window holds after the cursor.
func drain(t *testing.T, sub *feed.Subscription, after int64) (int64, bool) {
	t.Helper()
	for {
		evs, behind := sub.Next(after, nil, 100)
		if behind {
			return after, true
		}
		if len(evs) == 0 {
			return after, false
		}
		for _, e := range evs {
			if e.Sequence != after+1 {
				t.Fatalf("event %d after cursor %d", e.Sequence, after)
			}
			want := fmt.Sprintf("id: %d\ndata: {", e.Sequence)
			if !bytes.HasPrefix(e.SSE, []byte(want)) || !bytes.HasSuffix(e.SSE, []byte("}\n\n")) {
				t.Fatalf("event %d is not one SSE event: %q", e.Sequence, e.SSE)
			}
			after = e.Sequence
		}
	}
}

// TestFeedSlowSubscriber: a subscription that never reads holds nothing of
// its own, the window stays within its bounds whatever is published, the
// subscription that reads gets every frame, and the slow one is told it
// fell behind (to read the store) rather than given a gap.
func TestFeedSlowSubscriber(t *testing.T) {
	t.Parallel()
	f := feed.New(nil)
	defer f.Close()
	slow, fast := f.Subscribe("c"), f.Subscribe("c")
	defer slow.Close()
	defer fast.Close()
	var cursor int64
	for seq := int64(1); seq <= 20*feed.Window; seq += 10 {
		f.Publish(frames("c", seq, 10, 100))
		n, bytes := f.Held("c")
		if n > feed.Window || bytes > feed.WindowBytes {
			t.Fatalf("window holds %d events, %d bytes: over its bounds", n, bytes)
		}
		var behind bool
		if cursor, behind = drain(t, fast, cursor); behind {
			t.Fatalf("a subscriber that keeps up fell behind at %d", cursor)
		}
	}
	if cursor != 20*feed.Window {
		t.Fatalf("fast subscriber reached %d", cursor)
	}
	select {
	case <-slow.Ready():
	default:
		t.Fatal("the slow subscriber was not woken")
	}
	if _, behind := slow.Next(0, nil, 100); !behind {
		t.Fatal("a subscriber far behind the window was not told to read the store")
	}
	// Big frames: the byte bound holds too.
	f.Publish(frames("c", cursor+1, 64, 64<<10))
	if n, b := f.Held("c"); b > feed.WindowBytes || n < 1 {
		t.Fatalf("window holds %d events, %d bytes after big frames", n, b)
	}
}

// TestFeedWindowGrowsWithWhatItHolds: a window's ring is as large as what
// it holds needs, not Window slots from its first frame (a full ring is
// memory the collector scans at every cycle, for each streamed
// conversation); growing it keeps every event at its place, so a
// subscriber that has read nothing still gets every frame in order, and
// the window stops growing at its bounds.
func TestFeedWindowGrowsWithWhatItHolds(t *testing.T) {
	t.Parallel()
	f := feed.New(nil)
	defer f.Close()
	sub := f.Subscribe("c")
	defer sub.Close()
	f.Publish(frames("c", 1, 1, 10))
	if n := feed.RingSlots(f, "c"); n > feed.FirstRing || feed.FirstRing >= feed.Window/8 {
		t.Fatalf("one frame's window has a ring of %d slots", n)
	}
	var published int64 = 1
	for _, n := range []int64{2, 5, 9, 17, 31, 64, 100, 200} { // across every doubling, unaligned
		f.Publish(frames("c", published+1, n, 10))
		published += n
		if got, want := feed.RingSlots(f, "c"), min(feed.Window, max(feed.FirstRing, 2*int(published))); got > want {
			t.Fatalf("%d frames held in a ring of %d slots, want at most %d", published, got, want)
		}
	}
	// 429 frames published, none read: all of them, in order, from the window.
	if cursor, behind := drain(t, sub, 0); behind || cursor != published {
		t.Fatalf("a subscriber that read nothing reached %d (behind %v) of %d", cursor, behind, published)
	}
	// Past Window, the oldest go and the ring stays at Window.
	f.Publish(frames("c", published+1, feed.Window, 10))
	published += feed.Window
	if got := feed.RingSlots(f, "c"); got != feed.Window {
		t.Fatalf("a full window's ring has %d slots", got)
	}
	if _, behind := sub.Next(0, nil, 10); !behind {
		t.Fatal("a subscriber before the window was not told to read the store")
	}
	if cursor, behind := drain(t, sub, published-feed.Window); behind || cursor != published {
		t.Fatalf("from the window's first: reached %d (behind %v) of %d", cursor, behind, published)
	}
}

// TestFeedGapStartsOver: frames that do not follow the window (a commit
// published out of order) start it over; a subscriber before them is told
// to read the store, and the late commit is not taken twice.
func TestFeedGapStartsOver(t *testing.T) {
	t.Parallel()
	f := feed.New(nil)
	defer f.Close()
	sub := f.Subscribe("c")
	defer sub.Close()
	f.Publish(frames("c", 1, 4, 10))
	cursor, _ := drain(t, sub, 0)
	f.Publish(frames("c", 7, 2, 10)) // 5 and 6 are late
	if _, behind := sub.Next(cursor, nil, 10); !behind {
		t.Fatal("a gap in the window was not reported as behind")
	}
	f.Publish(frames("c", 5, 2, 10))
	if evs, _ := sub.Next(6, nil, 10); len(evs) != 2 || evs[0].Sequence != 7 {
		t.Fatalf("after the late commit: %+v", evs)
	}
}

// TestFeedNoStreamsKeepsNothing: frames of a conversation without streams
// are not kept, and the last stream's Close drops the window.
func TestFeedNoStreamsKeepsNothing(t *testing.T) {
	t.Parallel()
	f := feed.New(nil)
	defer f.Close()
	f.Publish(frames("c", 1, 3, 10))
	if n, _ := f.Held("c"); n != 0 {
		t.Fatalf("kept %d events for no stream", n)
	}
	sub := f.Subscribe("c")
	f.Publish(frames("c", 4, 3, 10))
	if n, _ := f.Held("c"); n != 3 {
		t.Fatalf("held %d, want 3", n)
	}
	sub.Close()
	if n, _ := f.Held("c"); n != 0 || f.Streams("c") != 0 {
		t.Fatalf("after the last Close: %d events, %d streams", n, f.Streams("c"))
	}
}

// TestFeedRefreshReadsOncePerConversation: wake-ups for another process's
// commits read the store once per conversation, not once per stream, and
// wake-ups during a read make one more read, not one each.
func TestFeedRefreshReadsOncePerConversation(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	f := feed.New(func(ctx context.Context, conv string, after int64, limit int) ([]protocol.RawFrame, error) {
		n := reads.Add(1)
		if n == 1 {
			<-release // hold the first read while more wake-ups arrive
		}
		if after >= 3 {
			return nil, nil
		}
		return frames(conv, after+1, 3-after, 10), nil
	})
	subs := make([]*feed.Subscription, 100)
	for i := range subs {
		subs[i] = f.Subscribe("c")
	}
	for range 10 {
		f.Refresh("c")
	}
	once.Do(func() { close(release) })
	testutil.Eventually(t, func() bool { return reads.Load() >= 2 }, "the second read")
	f.Close() // waits for the refreshes
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads for 10 wake-ups of 100 streams, want 2 (one, and one for the wake-ups during it)", n)
	}
	for i, s := range subs {
		if evs, behind := s.Next(0, nil, 10); behind || len(evs) != 3 {
			t.Fatalf("stream %d: %d events, behind %v", i, len(evs), behind)
		}
		s.Close()
	}
}

// TestFeedConcurrentReadersExactlyOnce: streams that join while commits
// land (subscribe, read the store to its end, then follow the window)
// read the window together, fall back to the store when the window has moved past them, and wait for Ready as soon as a
// read comes back short, without asking again: each gets every frame
// exactly once, in order, whatever the interleaving with the commits.
func TestFeedConcurrentReadersExactlyOnce(t *testing.T) {
	t.Parallel()
	const total, readers, limit = 6000, 24, 16
	f := feed.New(nil)
	defer f.Close()
	var mu sync.Mutex
	var committed []protocol.RawFrame // the store: what committed, in order
	readStore := func(after int64, n int) []protocol.RawFrame {
		mu.Lock()
		defer mu.Unlock()
		if after >= int64(len(committed)) {
			return nil
		}
		return committed[after:min(int64(len(committed)), after+int64(n))]
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, readers)
	for r := range readers {
		wg.Go(func() {
			<-start
			for range r * 40 { // join at different points of the commits
				if len(readStore(0, total)) >= total {
					break
				}
				runtime.Gosched()
			}
			sub := f.Subscribe("c") // before the store read: nothing is missed
			defer sub.Close()
			var cursor int64
			fromStore := true
			timeout := time.After(time.Minute) // a safety net only
			for cursor < total {
				if fromStore {
					page := readStore(cursor, 500)
					for _, fr := range page {
						if fr.Sequence != cursor+1 {
							errs <- fmt.Errorf("reader %d: store frame %d after %d", r, fr.Sequence, cursor)
							return
						}
						cursor = fr.Sequence
					}
					if len(page) == 500 {
						continue
					}
					fromStore = false
				}
				evs, behind := sub.Next(cursor, nil, limit)
				if behind {
					fromStore = true
					continue
				}
				for _, e := range evs {
					if e.Sequence != cursor+1 {
						errs <- fmt.Errorf("reader %d: event %d after %d", r, e.Sequence, cursor)
						return
					}
					if !e.CreatedAt.Equal(time.Unix(1_700_000_000, 0)) {
						errs <- fmt.Errorf("reader %d: event %d has createdAt %v", r, e.Sequence, e.CreatedAt)
						return
					}
					cursor = e.Sequence
				}
				if len(evs) == limit || cursor == total {
					continue
				}
				select {
				case <-sub.Ready():
				case <-timeout:
					errs <- fmt.Errorf("reader %d: stuck at %d of %d", r, cursor, total)
					return
				}
			}
		})
	}
	close(start)
	for seq := int64(1); seq <= total; {
		n := min(int64(1+seq%7), total-seq+1) // commits of 1 to 7 frames
		batch := frames("c", seq, n, 20)
		mu.Lock()
		committed = append(committed, batch...)
		mu.Unlock()
		f.Publish(batch) // after the commit, as the backends do
		seq += n
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkFeedNext measures a conversation's streams reading the window
// together, as they do when a commit wakes them all: one Next per
// stream, run in parallel.
func BenchmarkFeedNext(b *testing.B) {
	f := feed.New(nil)
	defer f.Close()
	sub := f.Subscribe("c")
	defer sub.Close()
	f.Publish(frames("c", 1, feed.Window, 40))
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]feed.Event, 0, 4)
		for pb.Next() {
			evs, _ := sub.Next(feed.Window-4, dst[:0], 4)
			if len(evs) != 4 {
				b.Error("short read")
				return
			}
		}
	})
}

// BenchmarkFeedWindowMemory: the heap, and the part of it the collector
// scans, that 1 000 streamed conversations' windows hold with 40 small
// frames each (a 20 s bench run at 2 frames/s per conversation).
func BenchmarkFeedWindowMemory(b *testing.B) {
	const convs, held = 1000, 40
	batches := make([][]protocol.RawFrame, convs)
	for i := range batches {
		batches[i] = frames(fmt.Sprint("c", i), 1, held, 21)
	}
	scan := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	for b.Loop() {
		f := feed.New(nil)
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		metrics.Read(scan)
		scan0 := scan[0].Value.Uint64()
		subs := make([]*feed.Subscription, convs)
		for i := range subs {
			subs[i] = f.Subscribe(fmt.Sprint("c", i))
			f.Publish(batches[i])
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		metrics.Read(scan)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/convs, "heap-B/conv")
		b.ReportMetric(float64(scan[0].Value.Uint64()-scan0)/convs, "scan-B/conv")
		runtime.KeepAlive(subs)
		f.Close()
	}
}
