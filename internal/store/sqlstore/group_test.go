package sqlstore_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/sqlite/sqlitetest"
	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/store/storetest"
)

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	return sqlitetest.Open(t, storetest.Epoch)
}

// gatherAll makes the loop's next batch hold n transactions: when it has
// taken the first, it waits until the other n-1 are waiting.
func gatherAll(t *testing.T, s *sqlite.Store, n int) {
	var once sync.Once
	sqlstore.SetGatherHook(s.Store, func() {
		once.Do(func() {
			deadline := time.Now().Add(30 * time.Second) // a safety net, not a measurement
			for sqlstore.Waiting(s.Store) < n-1 {
				if time.Now().After(deadline) {
					t.Errorf("only %d transactions waiting, want %d", sqlstore.Waiting(s.Store), n-1)
					return
				}
				runtime.Gosched()
			}
		})
	})
}

func text(s string) []store.NewFrame {
	return []store.NewFrame{{Payload: protocol.TextPayload{Content: s, Format: "plain", Role: protocol.RoleAssistant}}}
}

// appendAll appends one frame to each turn at once and returns each
// caller's answer.
func appendAll(ctx context.Context, s store.Store, turns []storetest.ActiveTurn, req func(i int) string, frames func(i int) []store.NewFrame) []error {
	return allAtOnce(len(turns), func(i int) error {
		_, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: turns[i].ConversationID, RequestID: req(i),
			Frames: frames(i), Now: storetest.Epoch})
		return err
	})
}

// allAtOnce calls write(0) … write(n-1) at once, as n callers, and returns
// each caller's answer.
func allAtOnce(n int, write func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = write(i) })
	}
	wg.Wait()
	return errs
}

// TestGroupCommitFailedCommitFailsEveryCaller: when the shared commit of a
// batch fails, every caller in it gets an error, nothing of the batch is
// stored, and no stream is woken for it.
func TestGroupCommitFailedCommitFailsEveryCaller(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	const n = 8
	turns := storetest.ActiveTurns(t, s, n, storetest.Epoch)
	signals := make([]<-chan struct{}, n)
	for i, tn := range turns {
		signals[i] = s.FrameSignal(tn.ConversationID)
	}
	injected := errors.New("injected commit failure")
	gatherAll(t, s, n)
	var batch int
	sqlstore.SetBeforeCommitHook(s.Store, func(ran int) error {
		if batch == 0 {
			batch = ran
			return injected
		}
		return nil
	})
	errs := appendAll(t.Context(), s, turns, func(i int) string { return turns[i].RequestID }, func(int) []store.NewFrame { return text("lost") })
	if batch != n {
		t.Fatalf("the batch held %d transactions, want %d", batch, n)
	}
	for i, err := range errs {
		if !errors.Is(err, injected) {
			t.Errorf("caller %d: err = %v, want the commit's failure", i, err)
		}
	}
	for i, tn := range turns {
		wantStored(t, s, i, tn.ConversationID, 1) // the instruction alone
		select {
		case <-signals[i]:
			t.Errorf("conversation %d: a stream was woken for a batch that did not commit", i)
		default:
		}
	}
	// The store goes on: the next batch commits.
	errs = appendAll(t.Context(), s, turns, func(i int) string { return turns[i].RequestID }, func(int) []store.NewFrame { return text("kept") })
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d after the failure: %v", i, err)
		}
	}
	for i, tn := range turns {
		wantStored(t, s, i, tn.ConversationID, 2)
	}
}

// TestGroupCommitFailureRollsBackAlone: a logical transaction that fails
// in a batch rolls back alone; the others of the batch commit.
func TestGroupCommitFailureRollsBackAlone(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	const n = 6
	turns := storetest.ActiveTurns(t, s, n, storetest.Epoch)
	gatherAll(t, s, n)
	var batch int
	sqlstore.SetBeforeCommitHook(s.Store, func(ran int) error {
		if batch == 0 {
			batch = ran
		}
		return nil
	})
	// Caller 1 is not the active turn (conflict); caller 3 appends a
	// frame and then fails: its frame was written when it failed, and its
	// savepoint must take it back.
	errs := allAtOnce(n, func(i int) error {
		tn := turns[i]
		switch i {
		case 1:
			_, err := s.AppendFrames(t.Context(), store.AppendFramesParams{ConversationID: tn.ConversationID,
				RequestID: uuid.NewString(), Frames: text("ok"), Now: storetest.Epoch})
			return err
		case 3:
			return sqlstore.AppendThenFail(s.Store, t.Context(), tn.ConversationID, tn.RequestID, storetest.Epoch,
				protocol.TextPayload{Content: "half", Format: "plain", Role: protocol.RoleAssistant},
				protocol.Errorf(protocol.Validation, "the second frame is invalid"))
		}
		_, err := s.AppendFrames(t.Context(), store.AppendFramesParams{ConversationID: tn.ConversationID,
			RequestID: tn.RequestID, Frames: text("ok"), Now: storetest.Epoch})
		return err
	})
	if batch != n-2 {
		t.Fatalf("%d transactions of the batch ran to the commit, want %d", batch, n-2)
	}
	for i, err := range errs {
		switch i {
		case 1:
			if !protocol.IsCode(err, protocol.Conflict) {
				t.Errorf("caller 1: err = %v, want conflict", err)
			}
		case 3:
			if !protocol.IsCode(err, protocol.Validation) {
				t.Errorf("caller 3: err = %v, want validation", err)
			}
		default:
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		}
	}
	for i, tn := range turns {
		want := 2
		if i == 1 || i == 3 {
			want = 1
		}
		wantStored(t, s, i, tn.ConversationID, want)
	}
}

// wantStored checks that conversation i holds n frames, sequences 1..n,
// and that its next sequence agrees.
func wantStored(t *testing.T, s store.Store, i int, convID string, n int) {
	t.Helper()
	fs, err := s.ListFrames(t.Context(), store.ListFramesParams{ConversationID: convID})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.GetConversation(t.Context(), convID)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != n || fs[n-1].Sequence != int64(n) || c.LastSequence() != int64(n) {
		t.Errorf("conversation %d: %d frames stored, next sequence after %d; want %d", i, len(fs), c.LastSequence(), n)
	}
}

// TestGroupCommitPanicFailsAlone: a write transaction that panics fails
// with an error, alone; the writer loop and the other transactions of its
// batch go on.
func TestGroupCommitPanicFailsAlone(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	turns := storetest.ActiveTurns(t, s, 2, storetest.Epoch)
	gatherAll(t, s, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = sqlstore.Txn(s.Store, t.Context(), func() error { panic("boom") }) })
	for i, tn := range turns {
		wg.Go(func() {
			_, errs[i+1] = s.AppendFrames(t.Context(), store.AppendFramesParams{ConversationID: tn.ConversationID,
				RequestID: tn.RequestID, Frames: text("after the panic"), Now: storetest.Epoch})
		})
	}
	wg.Wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "panicked") {
		t.Fatalf("the panicking transaction answered %v", errs[0])
	}
	for i, tn := range turns {
		if errs[i+1] != nil {
			t.Fatalf("append %d beside the panic: %v", i, errs[i+1])
		}
		wantStored(t, s, i, tn.ConversationID, 2)
	}
}
