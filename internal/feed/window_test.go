package feed_test

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"

	"pgregory.net/rapid"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/protocol"
)

// TestWindowHoldsWhatWasPublished: whatever is published, in runs of any
// length and size, with gaps and repeats, the window gives back exactly
// the newest frames that follow one another, each as its own SSE event
// with its type and createdAt, within the window's bounds.
func TestWindowHoldsWhatWasPublished(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		f := feed.New(nil)
		defer f.Close()
		sub := f.Subscribe("c")
		defer sub.Close()
		types := []protocol.FrameType{protocol.FrameText, protocol.FrameDone, protocol.FrameToolCall, protocol.FrameError}
		want := map[int64]protocol.RawFrame{} // the model: what follows the window's first without a gap
		var first, last int64 = 1, 0
		next := int64(1)
		for range rapid.IntRange(1, 30).Draw(t, "publishes") {
			switch rapid.IntRange(0, 9).Draw(t, "kind") {
			case 0: // a gap: other frames are missing in between
				next += int64(rapid.IntRange(1, 3).Draw(t, "gap"))
			case 1: // a repeat of frames the window may hold
				next = max(1, next-int64(rapid.IntRange(1, 3).Draw(t, "back")))
			}
			n := rapid.IntRange(1, 30).Draw(t, "frames")
			size := rapid.SampledFrom([]int{1, 100, 3000, 20 << 10}).Draw(t, "size")
			fs := frames("c", next, int64(n), size)
			for i := range fs {
				fs[i].Type = types[(fs[i].Sequence)%int64(len(types))]
				fs[i].CreatedAt = float64(fs[i].Sequence) + 0.5
			}
			f.Publish(fs)
			for _, fr := range fs {
				switch {
				case last >= first && fr.Sequence <= last:
					continue // held already
				case last < first || fr.Sequence != last+1:
					first, want = fr.Sequence, map[int64]protocol.RawFrame{} // the window starts over
				}
				want[fr.Sequence], last = fr, fr.Sequence
			}
			next += int64(n)
		}
		n, held := f.Held("c")
		if n > feed.Window || held > feed.WindowBytes && n > 1 {
			t.Fatalf("window holds %d events, %d bytes: over its bounds", n, held)
		}
		if n == 0 || int64(n) > last-first+1 {
			t.Fatalf("window holds %d events of %d..%d", n, first, last)
		}
		from := last - int64(n) + 1
		evs, behind := sub.Next(from-1, nil, feed.Window)
		if behind || len(evs) != n {
			t.Fatalf("Next from %d: %d events, behind %v; held %d", from-1, len(evs), behind, n)
		}
		if _, behind := sub.Next(from-2, nil, 1); from > 1 && !behind {
			t.Fatalf("a cursor before the window (%d) is not behind", from-2)
		}
		for i, e := range evs {
			fr := want[from+int64(i)]
			sse, err := protocol.AppendSSE(nil, fr)
			if err != nil {
				t.Fatal(err)
			}
			if e.Sequence != fr.Sequence || e.Type != fr.Type || !bytes.Equal(e.SSE, sse) || !e.CreatedAt.Equal(protocol.Time(fr.CreatedAt)) {
				t.Fatalf("event %d: got seq %d type %s createdAt %v, %d bytes; want type %s createdAt %v, %d bytes",
					fr.Sequence, e.Sequence, e.Type, e.CreatedAt, len(e.SSE), fr.Type, protocol.Time(fr.CreatedAt), len(sse))
			}
			if cap(e.SSE) != len(e.SSE) {
				t.Fatalf("event %d: its SSE can be appended to in place (cap %d, len %d)", e.Sequence, cap(e.SSE), len(e.SSE))
			}
		}
	})
}

// TestWindowIsNotScanned: the windows of many streamed conversations,
// each holding hundreds of frames, give the collector almost nothing to
// scan: their slots and bytes hold no pointers, so a mark phase does not
// grow with the frames the daemon's windows hold.
func TestWindowIsNotScanned(t *testing.T) {
	const convs, held = 200, 300
	batches := make([][]protocol.RawFrame, convs)
	for i := range batches {
		batches[i] = frames(fmt.Sprint("c", i), 1, held, 21)
	}
	f := feed.New(nil)
	defer f.Close()
	before := scannable()
	subs := make([]*feed.Subscription, convs)
	for i := range subs {
		subs[i] = f.Subscribe(fmt.Sprint("c", i))
		f.Publish(batches[i])
	}
	per := (int64(scannable()) - int64(before)) / convs
	runtime.KeepAlive(subs)
	runtime.KeepAlive(batches) // alive at both reads: only the windows differ
	for i, s := range subs {
		if n, _ := f.Held(fmt.Sprint("c", i)); n != held {
			t.Fatalf("conversation %d holds %d frames, want %d", i, n, held)
		}
		s.Close()
	}
	if per > 2<<10 {
		t.Fatalf("a streamed conversation holding %d frames gives the collector %d bytes to scan", held, per)
	}
	t.Logf("%d bytes to scan per streamed conversation holding %d frames", per, held)
}

// scannable is the heap the collector scans, after a collection.
func scannable() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
