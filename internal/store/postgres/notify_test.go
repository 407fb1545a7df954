package postgres

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

func TestFramePayloads(t *testing.T) {
	t.Parallel()
	at := storetest.Epoch.Add(1234567 * time.Microsecond)
	frame := func(seq int64, content string) store.Frame {
		b, err := protocol.Marshal(text(content))
		if err != nil {
			t.Fatal(err)
		}
		return store.Frame{ConversationID: "c1", Sequence: seq, RequestID: "r1", Type: protocol.FrameText, Payload: b, CreatedAt: at}
	}
	var frames []store.Frame
	for i := range 60 {
		frames = append(frames, frame(int64(i+1), strings.Repeat("é", 150)))
	}
	payloads := framePayloads("inst", "c1", frames)
	if len(payloads) < 2 {
		t.Fatalf("%d payloads for %d frames of ~300 bytes: want them split", len(payloads), len(frames))
	}
	var got []store.Frame
	for _, p := range payloads {
		if len(p) > maxNotifyPayload {
			t.Fatalf("payload of %d bytes, over %d", len(p), maxNotifyPayload)
		}
		inst, id, fs, ok := parseFramePayload(p)
		if !ok || inst != "inst" || id != "c1" {
			t.Fatalf("parse %q...: %q %q %v", p[:40], inst, id, ok)
		}
		got = append(got, fs...)
	}
	eq := func(a, b store.Frame) bool {
		return a.ConversationID == b.ConversationID && a.Sequence == b.Sequence && a.RequestID == b.RequestID && a.Type == b.Type &&
			string(a.Payload) == string(b.Payload) && protocol.Timestamp(a.CreatedAt) == protocol.Timestamp(b.CreatedAt)
	}
	if !slices.EqualFunc(got, frames, eq) {
		t.Fatalf("round trip: %d frames, want the %d sent, in order and equal", len(got), len(frames))
	}
	// A frame too large for a notification: the conversation alone, read.
	big := append(slices.Clone(frames[:2]), frame(3, strings.Repeat("x", 8000)))
	if p := framePayloads("inst", "c1", big); len(p) != 1 || p[0] != "inst c1" {
		t.Fatalf("too large: %q, want the conversation alone", p)
	}
	if _, id, _, ok := parseFramePayload("inst c1"); ok || id != "c1" {
		t.Fatalf("conversation alone: ok %v id %q, want a read of c1", ok, id)
	}
	// Touched without frames (a status change, a purge): the conversation
	// alone, so the listener wakes its streams and reads, as before.
	if p := framePayloads("inst", "c1", nil); len(p) != 1 || p[0] != "inst c1" {
		t.Fatalf("no frames: %q", p)
	}
	if _, _, fs, ok := parseFramePayload("inst c1 [not json"); ok || fs != nil {
		t.Fatalf("bad list: ok %v, want a read", ok)
	}
}

// reads counts a Store's reads of frames.
type reads struct {
	mu sync.Mutex
	n  int
}

func (r *reads) StoreOperation(op string, _ time.Duration) {
	if op == "list_frames" {
		r.mu.Lock()
		r.n++
		r.mu.Unlock()
	}
}
func (*reads) WriterBatch(int)               {}
func (*reads) WriterQueueWait(time.Duration) {}

func (r *reads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestFramesInNotifications: frames committed through one Store reach a
// subscriber of another from the notification, with no read of the store;
// a frame too large for a notification is read.
func TestFramesInNotifications(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openAt(t, url), openAt(t, url)
	ctx := t.Context()
	turn := storetest.ActiveTurns(t, a, 1, storetest.Epoch)[0]
	sub := b.Subscribe(turn.ConversationID)
	defer sub.Close()
	after := b.getConv(t, turn.ConversationID).LastSequence()
	var r reads
	b.Observe(&r)
	next := func(want int64) []feed.Event {
		t.Helper()
		got := readTo(t, sub, after, want)
		if len(got) > 0 {
			after = got[len(got)-1].Sequence
		}
		return got
	}
	for i := range 3 {
		fs, err := a.AppendFrames(ctx, store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID,
			Frames: []store.NewFrame{{Payload: text("one")}, {Payload: text("two")}}, Now: storetest.Epoch})
		if err != nil {
			t.Fatal(err)
		}
		evs := next(fs[1].Sequence)
		if len(evs) != 2 {
			t.Fatalf("commit %d: %d events, want 2", i, len(evs))
		}
		for j, e := range evs {
			want, err := protocol.AppendSSE(nil, fs[j].Wire())
			if err != nil {
				t.Fatal(err)
			}
			if string(e.SSE) != string(want) {
				t.Fatalf("commit %d frame %d: %s, want %s", i, j, e.SSE, want)
			}
		}
	}
	if n := r.count(); n != 0 {
		t.Fatalf("%d reads of frames by the receiving store, want none (the frames were in the notifications)", n)
	}
	fs, err := a.AppendFrames(ctx, store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID,
		Frames: []store.NewFrame{{Payload: text(strings.Repeat("x", 9000))}}, Now: storetest.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	if evs := next(fs[0].Sequence); len(evs) != 1 || !strings.Contains(string(evs[0].SSE), strings.Repeat("x", 9000)) {
		t.Fatalf("large frame: %d events", len(evs))
	}
	if n := r.count(); n == 0 {
		t.Fatal("a frame too large for a notification arrived without a read")
	}
}

// readTo reads a subscription's events after the cursor until sequence
// want, from the window (never behind it), waiting for each commit.
func readTo(t testing.TB, sub *feed.Subscription, after, want int64) []feed.Event {
	t.Helper()
	var got []feed.Event
	for after < want {
		evs, behind := sub.Next(after, nil, 100)
		if behind {
			t.Fatalf("behind at %d", after)
		}
		if len(evs) == 0 {
			select {
			case <-sub.Ready():
			case <-time.After(testutil.Patience):
				t.Fatalf("sequence %d never arrived (at %d)", want, after)
			}
			continue
		}
		got = append(got, evs...)
		after = evs[len(evs)-1].Sequence
	}
	return got
}
