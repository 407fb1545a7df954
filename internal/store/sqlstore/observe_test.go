package sqlstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// recorder is a sqlstore.Observer that keeps what it is told.
type recorder struct {
	mu      sync.Mutex
	ops     map[string]int
	batches []int
	waits   int
}

func (r *recorder) StoreOperation(op string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d < 0 {
		panic("negative duration")
	}
	r.ops[op]++
}

func (r *recorder) WriterBatch(size int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, size)
}

func (r *recorder) WriterQueueWait(time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits++
}

// TestStoreObserver: every store operation is timed under its name, and
// the group-commit writer reports each batch's size and each transaction's
// wait; the oldest wait is 0 when the writer is idle.
func TestStoreObserver(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	rec := &recorder{ops: map[string]int{}}
	s.Observe(rec)
	const n = 5
	turns := storetest.ActiveTurns(t, s, n, storetest.Epoch)
	gatherAll(t, s, n)
	errs := appendAll(t.Context(), s, turns, func(i int) string { return turns[i].RequestID }, func(int) []store.NewFrame { return text("hi") })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if _, err := s.ListFrames(t.Context(), store.ListFramesParams{ConversationID: turns[0].ConversationID}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for op, want := range map[string]int{"create_conversation": n, "submit_turn": n, "append_frames": n, "list_frames": 1} {
		if rec.ops[op] < want {
			t.Errorf("operation %s observed %d times, want at least %d (all: %v)", op, rec.ops[op], want, rec.ops)
		}
	}
	found := false
	for _, b := range rec.batches {
		found = found || b == n
	}
	if !found {
		t.Errorf("no batch of %d transactions among %v", n, rec.batches)
	}
	total := 0
	for _, b := range rec.batches {
		total += b
	}
	if rec.waits != total {
		t.Errorf("%d queue waits for %d batched transactions", rec.waits, total)
	}
	if w := s.WriterOldestWait(); w != 0 {
		t.Errorf("an idle writer's oldest wait is %v", w)
	}
	var _ sqlstore.Observer = rec
}

// TestWriterOldestWaitWhileABatchRuns: while the writer holds a batch, the
// oldest wait grows from the first transaction's hand-over.
func TestWriterOldestWaitWhileABatchRuns(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	turns := storetest.ActiveTurns(t, s, 1, storetest.Epoch)
	inBatch, release := make(chan struct{}), make(chan struct{})
	sqlstore.SetBeforeCommitHook(s.Store, func(int) error {
		close(inBatch)
		<-release
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := s.AppendFrames(t.Context(), store.AppendFramesParams{ConversationID: turns[0].ConversationID, RequestID: turns[0].RequestID,
			Frames: text("held"), Now: storetest.Epoch})
		done <- err
	}()
	<-inBatch
	first := s.WriterOldestWait()
	if first <= 0 {
		t.Errorf("oldest wait %v while a batch is held", first)
	}
	// It grows while the batch is held (no fixed sleep: wait for the clock).
	testutil.Eventually(t, func() bool { return s.WriterOldestWait() > first }, "the oldest wait to grow while the batch is held")
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The loop answers the batch's callers, then clears the oldest wait:
	// on a loaded machine the caller can look in between.
	testutil.Eventually(t, func() bool { return s.WriterOldestWait() == 0 }, "the oldest wait to clear after the batch")
}
