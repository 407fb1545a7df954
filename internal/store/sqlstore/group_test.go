package sqlstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/store/storetest"
)

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(t.Context(), storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	return s
}

// turn is a conversation with an active turn, ready to append.
type turn struct{ conv, req string }

func activeTurns(t *testing.T, s store.Store, n int) []turn {
	t.Helper()
	out := make([]turn, n)
	for i := range out {
		c, err := s.CreateConversation(t.Context(), store.CreateConversationParams{ID: uuid.NewString(), Now: storetest.Epoch})
		if err != nil {
			t.Fatal(err)
		}
		rid := uuid.NewString()
		if _, _, err := s.SubmitTurn(t.Context(), store.SubmitTurnParams{ConversationID: c.ID, RequestID: rid, Instruction: "x",
			ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch}); err != nil {
			t.Fatal(err)
		}
		out[i] = turn{c.ID, rid}
	}
	return out
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
func appendAll(ctx context.Context, s store.Store, turns []turn, req func(i int) string, frames func(i int) []store.NewFrame) []error {
	errs := make([]error, len(turns))
	var wg sync.WaitGroup
	for i, tn := range turns {
		wg.Go(func() {
			_, errs[i] = s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: tn.conv, RequestID: req(i),
				Frames: frames(i), Now: storetest.Epoch})
		})
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
	turns := activeTurns(t, s, n)
	signals := make([]<-chan struct{}, n)
	for i, tn := range turns {
		signals[i] = s.FrameSignal(tn.conv)
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
	errs := appendAll(t.Context(), s, turns, func(i int) string { return turns[i].req }, func(int) []store.NewFrame { return text("lost") })
	if batch != n {
		t.Fatalf("the batch held %d transactions, want %d", batch, n)
	}
	for i, err := range errs {
		if !errors.Is(err, injected) {
			t.Errorf("caller %d: err = %v, want the commit's failure", i, err)
		}
	}
	for i, tn := range turns {
		c, err := s.GetConversation(t.Context(), tn.conv)
		if err != nil {
			t.Fatal(err)
		}
		if c.LastSequence() != 1 {
			t.Errorf("conversation %d is at sequence %d after a failed commit, want 1 (the instruction)", i, c.LastSequence())
		}
		select {
		case <-signals[i]:
			t.Errorf("conversation %d: a stream was woken for a batch that did not commit", i)
		default:
		}
	}
	// The store goes on: the next batch commits.
	errs = appendAll(t.Context(), s, turns, func(i int) string { return turns[i].req }, func(int) []store.NewFrame { return text("kept") })
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d after the failure: %v", i, err)
		}
	}
	for _, tn := range turns {
		fs, err := s.ListFrames(t.Context(), store.ListFramesParams{ConversationID: tn.conv})
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 2 || fs[1].Sequence != 2 {
			t.Fatalf("frames after recovery = %+v, want the instruction and one append at sequence 2", fs)
		}
	}
}

// TestGroupCommitFailureRollsBackAlone: a logical transaction that fails
// in a batch rolls back alone; the others of the batch commit.
func TestGroupCommitFailureRollsBackAlone(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	const n = 6
	turns := activeTurns(t, s, n)
	gatherAll(t, s, n)
	var batch int
	sqlstore.SetBeforeCommitHook(s.Store, func(ran int) error {
		if batch == 0 {
			batch = ran
		}
		return nil
	})
	// Caller 1 is not the active turn (conflict); caller 3 appends a
	// valid frame and then an invalid one: its first frame was written
	// when it failed, and its savepoint must take it back.
	errs := appendAll(t.Context(), s, turns,
		func(i int) string {
			if i == 1 {
				return uuid.NewString()
			}
			return turns[i].req
		},
		func(i int) []store.NewFrame {
			if i == 3 {
				return append(text("half"), store.NewFrame{Payload: protocol.TextPayload{Content: "x", Format: "html"}})
			}
			return text("ok")
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
		fs, err := s.ListFrames(t.Context(), store.ListFramesParams{ConversationID: tn.conv})
		if err != nil {
			t.Fatal(err)
		}
		want := 2
		if i == 1 || i == 3 {
			want = 1
		}
		if len(fs) != want {
			t.Errorf("conversation %d has %d frames, want %d", i, len(fs), want)
		}
		c, _ := s.GetConversation(t.Context(), tn.conv)
		if c.LastSequence() != int64(want) {
			t.Errorf("conversation %d: next sequence says %d frames, want %d", i, c.LastSequence(), want)
		}
	}
}
