package sqlstore_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/sqlite/sqlitetest"
	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
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
			deadline := time.Now().Add(testutil.Patience) // a safety net, not a measurement
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

// settle returns once the streams were told of every commit so far. A
// commit's callers go on before its streams are told, so the setup's last
// wake-up may still be on its way when a test takes a signal; the writer
// loop tells them before it runs its next batch, so one more transaction's
// return is the proof.
func settle(t *testing.T, s *sqlite.Store) {
	t.Helper()
	if err := sqlstore.Txn(s.Store, t.Context(), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
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
	settle(t, s)
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

// TestGroupCommitStreamsSeeFramesOnlyAfterCommit: the frames of a batch
// are nowhere a stream reads (the feed's window, its wake-up) until the
// batch's commit returned, and the callers of the batch are answered
// before its streams are woken (a turn hands the writer its next frames
// without waiting for the commit's fan-out to the sockets); then every
// stream gets its frame.
func TestGroupCommitStreamsSeeFramesOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	const n = 6
	turns := storetest.ActiveTurns(t, s, n, storetest.Epoch)
	subs := make([]*feed.Subscription, n)
	for i, tn := range turns {
		subs[i] = s.Subscribe(tn.ConversationID)
		defer subs[i].Close()
	}
	// The setup's last commit may reach the feed after Subscribe: settle,
	// then drain its wake-ups.
	settle(t, s)
	for _, sub := range subs {
		select {
		case <-sub.Ready():
		default:
		}
	}
	// Nothing a stream reads holds a frame after the instruction (1).
	unseen := func(when string) {
		for i, sub := range subs {
			if ev, behind := sub.Next(1, nil, 10); len(ev) != 0 || behind {
				t.Errorf("%s: conversation %d's stream sees %d frames (behind %v)", when, i, len(ev), behind)
			}
			select {
			case <-sub.Ready():
				t.Errorf("%s: conversation %d's stream was woken", when, i)
			default:
			}
		}
	}
	gatherAll(t, s, n)
	var committed, published atomic.Bool
	var returned atomic.Int32
	sqlstore.SetBeforeCommitHook(s.Store, func(ran int) error {
		if ran != n {
			t.Errorf("the batch held %d transactions, want %d", ran, n)
		}
		wantStored(t, s, 0, turns[0].ConversationID, 1) // the readers do not see the batch either
		unseen("before the commit")
		committed.Store(true)
		return nil
	})
	sqlstore.SetBeforePublishHook(s.Store, func() {
		if !committed.Load() || published.Swap(true) {
			return // another batch's commit
		}
		// Every caller is answered before the streams are woken; a
		// caller that never returns fails the test here.
		deadline := time.Now().Add(testutil.Patience) // a safety net, not a measurement
		for returned.Load() < n && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		if got := returned.Load(); got != n {
			t.Errorf("%d of %d callers answered before the streams were woken", got, n)
		}
		unseen("before the streams are told")
	})
	errs := allAtOnce(n, func(i int) error {
		_, err := s.AppendFrames(t.Context(), store.AppendFramesParams{ConversationID: turns[i].ConversationID,
			RequestID: turns[i].RequestID, Frames: text("after the commit"), Now: storetest.Epoch})
		returned.Add(1)
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	for i, sub := range subs {
		select {
		case <-sub.Ready():
		case <-time.After(testutil.Patience): // a safety net, not a measurement
			t.Fatalf("conversation %d's stream was never woken", i)
		}
		if ev, _ := sub.Next(1, nil, 10); len(ev) != 1 || ev[0].Sequence != 2 {
			t.Errorf("conversation %d's stream got %d frames after the commit, want its frame 2", i, len(ev))
		}
	}
	if !published.Load() {
		t.Error("the batch's streams were told without the hook between its callers and them")
	}
}
