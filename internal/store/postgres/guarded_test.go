package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// appendOne appends one text frame to a turn.
func appendOne(ctx context.Context, s *Store, tr storetest.ActiveTurn, what string) ([]store.Frame, error) {
	return s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: tr.ConversationID, RequestID: tr.RequestID,
		Frames: []store.NewFrame{{Payload: text(what)}}, Now: storetest.Epoch})
}

// roundTrips checks that fn's batched appends took want round trips to
// the database. A batch whose appends were all refused answers them
// before its ROLLBACK's round trip: it is waited for.
func roundTrips(t *testing.T, s *Store, want int64, what string, fn func()) {
	t.Helper()
	before := s.rounds.Load()
	fn()
	testutil.Eventually(t, func() bool { return s.rounds.Load()-before >= want }, what, ": ", want, " round trips")
	if n := s.rounds.Load() - before; n != want {
		t.Errorf("%s: %d round trips, want %d", what, n, want)
	}
}

// TestAppendsInOneRoundTrip: a turn's appends after its first, on the
// daemon that runs it, each take one round trip to the database (the
// first reads the conversation: two); another daemon's streams get every
// frame, in order, once.
func TestAppendsInOneRoundTrip(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openWith(t, url, Options{appendWriters: 1}), openAt(t, url)
	ctx := t.Context()
	live := registerInstance(t, a, time.Hour)
	tr := runningOwned(t, a, live)
	sub := b.Subscribe(tr.ConversationID)
	defer sub.Close()
	after := b.getConv(t, tr.ConversationID).LastSequence()
	fenced := store.WithFence(ctx, store.Fence{Instance: live})
	var got []store.Frame
	for i := range 5 {
		want := int64(1)
		if i == 0 {
			want = 2
		}
		roundTrips(t, a, want, fmt.Sprint("append ", i), func() {
			fs, err := appendOne(fenced, a, tr, fmt.Sprint("frame ", i))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fs...)
		})
	}
	for i, f := range got {
		if f.Sequence != after+1+int64(i) {
			t.Fatalf("append %d: sequence %d, want %d", i, f.Sequence, after+1+int64(i))
		}
	}
	checkDelivered(t, sub, after, got)
}

// checkDelivered reads sub from after and checks it got exactly want, in
// order.
func checkDelivered(t *testing.T, sub *feed.Subscription, after int64, want []store.Frame) {
	t.Helper()
	evs := readTo(t, sub, after, want[len(want)-1].Sequence)
	if len(evs) != len(want) {
		t.Fatalf("%d events delivered, want %d", len(evs), len(want))
	}
	for i, e := range evs {
		sse, err := protocol.AppendSSE(nil, want[i].Wire())
		if err != nil {
			t.Fatal(err)
		}
		if string(e.SSE) != string(sse) {
			t.Fatalf("event %d: %s, want %s", i, e.SSE, sse)
		}
	}
}

// TestGuardedAppendsSeeOtherDaemons: a daemon whose turn's appends take
// one round trip expects its conversation as it left it; when another
// daemon changed what the append depends on meanwhile, the append is
// answered as if it had read it: after the other daemon's frames, or
// refused with the error the change calls for. A refused append writes
// nothing and notifies nothing: a third daemon's stream gets the next
// frame committed at that sequence, not the refused one.
func TestGuardedAppendsSeeOtherDaemons(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b, c := openWith(t, url, Options{appendWriters: 1}), openAt(t, url), openAt(t, url)
	ctx := t.Context()
	conflict := func(err error) bool { return protocol.IsCode(err, protocol.Conflict) && !store.IsFenced(err) }
	cases := []struct {
		name string
		// change changes what the append depends on; it returns the
		// request that may append to the conversation after it, if any.
		change func(t *testing.T, tr storetest.ActiveTurn, live string) (next string)
		want   func(error) bool // nil: the append commits
	}{
		{"another daemon appended", func(t *testing.T, tr storetest.ActiveTurn, _ string) string {
			if _, err := appendOne(ctx, b, tr, "from the other daemon"); err != nil {
				t.Fatal(err)
			}
			return tr.RequestID
		}, nil},
		{"the instance was reaped", func(t *testing.T, tr storetest.ActiveTurn, live string) string {
			if _, err := b.ReapInstances(ctx, store.ReapInstancesParams{Now: storetest.Epoch.Add(2 * time.Hour), Except: uuid.NewString()}); err != nil {
				t.Fatal(err)
			}
			return tr.RequestID
		}, store.IsFenced},
		{"the turn moved to another instance", func(t *testing.T, tr storetest.ActiveTurn, _ string) string {
			other := registerInstance(t, b, time.Hour)
			if _, err := b.db.ExecContext(ctx, `UPDATE studio_operator_turns SET owner_instance = $1 WHERE request_id = $2`, other, tr.RequestID); err != nil {
				t.Fatal(err)
			}
			return tr.RequestID
		}, store.IsFenced},
		{"the conversation has another active turn", func(t *testing.T, tr storetest.ActiveTurn, _ string) string {
			// Only the active turn changes (the sequence does not, as it
			// does with a turn's done frame).
			// Another turn of the conversation (a frame's turn is one of
			// its conversation's), started as a turn that waited would be.
			other := uuid.NewString()
			if _, err := b.db.ExecContext(ctx, `INSERT INTO studio_operator_turns
				(request_id, conversation_id, instruction, context_json, context_hash, status, created_at, first_sequence)
				SELECT $1, id, 'next', '{}', 'h', 'running', 0, next_sequence FROM studio_operator_conversations WHERE id = $2`,
				other, tr.ConversationID); err != nil {
				t.Fatal(err)
			}
			if _, err := b.db.ExecContext(ctx, `UPDATE studio_operator_conversations SET active_request_id = $1 WHERE id = $2`, other, tr.ConversationID); err != nil {
				t.Fatal(err)
			}
			return other
		}, conflict},
		{"the turn ended", func(t *testing.T, tr storetest.ActiveTurn, _ string) string {
			if _, _, err := b.FinishTurn(ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: store.TurnCompleted, Now: storetest.Epoch}); err != nil {
				t.Fatal(err)
			}
			return "" // its done frame is the next frame
		}, conflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := registerInstance(t, a, time.Hour)
			tr := runningOwned(t, a, live)
			fenced := store.WithFence(ctx, store.Fence{Instance: live})
			for i := range 2 { // the second takes one round trip: a expects the conversation
				roundTrips(t, a, int64(2-i), fmt.Sprint("append ", i, " before the change"), func() {
					if _, err := appendOne(fenced, a, tr, "before"); err != nil {
						t.Fatal(err)
					}
				})
			}
			sub := c.Subscribe(tr.ConversationID)
			defer sub.Close()
			after := c.getConv(t, tr.ConversationID).LastSequence()
			nextReq := tc.change(t, tr, live)
			var got []store.Frame
			var err error
			// The one round trip commits nothing, then the two round trips.
			roundTrips(t, a, 3, "the append after the change", func() { got, err = appendOne(fenced, a, tr, "refused unless nothing changed") })
			stored, lerr := c.ListFrames(ctx, store.ListFramesParams{ConversationID: tr.ConversationID})
			if lerr != nil {
				t.Fatal(lerr)
			}
			for i, f := range stored {
				if f.Sequence != int64(i+1) {
					t.Fatalf("stored sequences %v: not 1..%d", sequences(stored), len(stored))
				}
			}
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if last := stored[len(stored)-1]; last.Sequence != got[0].Sequence || string(last.Payload) != string(got[0].Payload) {
					t.Fatalf("stored last %d %s, the append returned %d %s", last.Sequence, last.Payload, got[0].Sequence, got[0].Payload)
				}
				checkDelivered(t, sub, after, stored[after:])
				return
			}
			if !tc.want(err) {
				t.Fatalf("err = %v", err)
			}
			for _, f := range stored {
				if strings.Contains(string(f.Payload), "refused") {
					t.Fatalf("the refused append stored frame %d", f.Sequence)
				}
			}
			// The next frame committed at the sequence the refused append
			// expected: the stream gets it, not the refused one.
			want := slices.Clone(stored[after:])
			if nextReq != "" {
				fs, err := appendOne(ctx, b, storetest.ActiveTurn{ConversationID: tr.ConversationID, RequestID: nextReq}, "the next frame")
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, fs...)
			}
			checkDelivered(t, sub, after, want)
		})
	}
}

func sequences(fs []store.Frame) []int64 {
	out := make([]int64, len(fs))
	for i, f := range fs {
		out[i] = f.Sequence
	}
	return out
}

// TestGuardedAppendsConcurrently: two daemons append to one conversation
// at once, each from several callers (so batches of one daemon are in
// flight together, and each daemon's expectations are often wrong): every
// append is stored once at the sequence it was answered with, the
// sequences have no gap, and a third daemon's stream gets them all in
// order, once.
func TestGuardedAppendsConcurrently(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b, c := openWith(t, url, Options{appendWriters: 4}), openWith(t, url, Options{appendWriters: 4}), openAt(t, url)
	ctx := t.Context()
	tr := storetest.ActiveTurns(t, a, 1, storetest.Epoch)[0]
	sub := c.Subscribe(tr.ConversationID)
	defer sub.Close()
	after := c.getConv(t, tr.ConversationID).LastSequence()
	const callers, each = 4, 25
	var mu sync.Mutex
	answered := map[int64]string{}
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		for i := range callers {
			wg.Go(func() {
				for j := range each {
					what := fmt.Sprintf("%p %d %d", s, i, j)
					fs, err := appendOne(ctx, s, tr, what)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if prev, dup := answered[fs[0].Sequence]; dup {
						t.Errorf("sequence %d answered twice: %q and %q", fs[0].Sequence, prev, what)
					}
					answered[fs[0].Sequence] = what
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	stored, err := c.ListFrames(ctx, store.ListFramesParams{ConversationID: tr.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != int(after)+2*callers*each {
		t.Fatalf("%d frames stored, want %d", len(stored), int(after)+2*callers*each)
	}
	for i, f := range stored {
		if f.Sequence != int64(i+1) {
			t.Fatalf("stored sequences have a gap at %d", i+1)
		}
		if what, ok := answered[f.Sequence]; f.Sequence > after && (!ok || !strings.Contains(string(f.Payload), what)) {
			t.Fatalf("frame %d stored as %s, answered as %q", f.Sequence, f.Payload, what)
		}
	}
	checkDelivered(t, sub, after, stored[after:])
}
