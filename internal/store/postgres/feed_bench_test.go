package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// BenchmarkFeedAcrossInstances times a frame appended through one Store to
// its arrival at a subscriber of another Store on the same database (two
// daemons' stores): the sender's commit, PostgreSQL's notification to the
// receiver's listener, and the receiver's publishing of the frame to its
// feed; with the frames in the notification (notify=frames) and with the
// conversation only, the receiver reading the frames (notify=plain, as
// before). One frame per iteration, the next appended once the previous
// one arrived. after-commit is from the sender's commit returning.
//
//	go test ./internal/store/postgres -run '^$' -bench FeedAcrossInstances -benchtime 1000x -count 3
func BenchmarkFeedAcrossInstances(b *testing.B) {
	for _, plain := range []bool{false, true} {
		name := "notify=frames"
		if plain {
			name = "notify=plain"
		}
		b.Run(name, func(b *testing.B) { benchFeedAcross(b, plain) })
	}
}

func benchFeedAcross(b *testing.B, plain bool) {
	url := newDatabase(b)
	from, to := openWith(b, url, Options{plainNotify: plain}), openAt(b, url)
	ctx := b.Context()
	turn := storetest.ActiveTurns(b, from, 1, storetest.Epoch)[0]
	sub := to.Subscribe(turn.ConversationID)
	defer sub.Close()
	after := int64(0)
	if fs, err := to.ListFrames(ctx, store.ListFramesParams{ConversationID: turn.ConversationID, Limit: 500}); err != nil {
		b.Fatal(err)
	} else if len(fs) > 0 {
		after = fs[len(fs)-1].Sequence
	}
	var total, commit, delivery []time.Duration
	frame := []store.NewFrame{{Payload: text("a line of model output of ordinary length, streamed.")}}
	for b.Loop() {
		start := time.Now()
		fs, err := from.AppendFrames(ctx, store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID, Frames: frame, Now: start})
		if err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		want := fs[len(fs)-1].Sequence
		if evs := readTo(b, sub, after, want); len(evs) > 0 {
			after = evs[len(evs)-1].Sequence
		}
		total = append(total, time.Since(start))
		commit = append(commit, committed.Sub(start))
		delivery = append(delivery, time.Since(committed))
	}
	pct := func(ds []time.Duration, p float64) float64 {
		ds = slices.Sorted(slices.Values(ds))
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(total, 0.5), "p50-ms")
	b.ReportMetric(pct(total, 0.99), "p99-ms")
	b.ReportMetric(pct(commit, 0.5), "commit-p50-ms")
	b.ReportMetric(pct(commit, 0.99), "commit-p99-ms")
	b.ReportMetric(pct(delivery, 0.5), "after-commit-p50-ms")
	b.ReportMetric(pct(delivery, 0.99), "after-commit-p99-ms")
}

// openWith opens and migrates a store with options, closed when tb ends.
func openWith(tb testing.TB, url string, opts Options) *Store {
	tb.Helper()
	s, err := OpenWith(tb.Context(), url, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(tb.Context(), storetest.Epoch); err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	return s
}
