package postgres

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// batches records the sizes of a Store's append batches.
type batches struct {
	mu    sync.Mutex
	sizes []int
}

func (*batches) StoreOperation(string, time.Duration) {}
func (b *batches) WriterBatch(n int) {
	b.mu.Lock()
	b.sizes = append(b.sizes, n)
	b.mu.Unlock()
}
func (*batches) WriterQueueWait(time.Duration) {}

func (b *batches) get() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sizes)
}

// runningOwned creates a conversation with a turn started by instance.
func runningOwned(t *testing.T, s *Store, instance string) storetest.ActiveTurn {
	t.Helper()
	ctx := t.Context()
	convID, rid := uuid.NewString(), uuid.NewString()
	if _, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: convID, Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: convID, RequestID: rid, Instruction: "go",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch, Instance: instance}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartTurn(ctx, store.StartTurnParams{RequestID: rid, Now: storetest.Epoch, Instance: instance}); err != nil {
		t.Fatal(err)
	}
	return storetest.ActiveTurn{ConversationID: convID, RequestID: rid}
}

func registerInstance(t *testing.T, s *Store, lease time.Duration) string {
	t.Helper()
	id := uuid.NewString()
	if _, err := s.RegisterInstance(t.Context(), store.RegisterInstanceParams{Instance: store.Instance{ID: id,
		Address: "http://127.0.0.1:8765", PID: 1, Version: "test", StartedAt: storetest.Epoch, HeartbeatAt: storetest.Epoch,
		LeaseExpiresAt: storetest.Epoch.Add(lease)}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestBatchedAppendsFailAlone: the appends of one batch share one
// transaction, yet each keeps its own answer. In one batch, appends a
// check refuses — a reaped instance's, a live instance's to a turn it
// does not own, one to a turn that has ended — fail with their own errors
// and write nothing; the good ones beside them, two to one conversation,
// commit with consecutive sequences, and the frames the callers got are
// those stored.
func TestBatchedAppendsFailAlone(t *testing.T) {
	t.Parallel()
	s := openWith(t, newDatabase(t), Options{appendWriters: 1})
	ctx := t.Context()
	live := registerInstance(t, s, time.Hour)
	dead := registerInstance(t, s, -time.Second)
	if _, err := s.ReapInstances(ctx, store.ReapInstancesParams{Now: storetest.Epoch, Except: live}); err != nil {
		t.Fatal(err)
	}
	mine := []storetest.ActiveTurn{runningOwned(t, s, live), runningOwned(t, s, live)}
	orphan := runningOwned(t, s, dead) // the reaped instance's turn, not yet taken over
	plain := storetest.ActiveTurns(t, s, 2, storetest.Epoch)
	ended := storetest.ActiveTurns(t, s, 1, storetest.Epoch)[0]
	if _, _, err := s.FinishTurn(ctx, store.FinishTurnParams{RequestID: ended.RequestID, Status: store.TurnCompleted, Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	blocker := storetest.ActiveTurns(t, s, 1, storetest.Epoch)[0]
	liveCtx := store.WithFence(ctx, store.Fence{Instance: live})
	deadCtx := store.WithFence(ctx, store.Fence{Instance: dead})

	conflict := func(err error) bool { return protocol.IsCode(err, protocol.Conflict) && !store.IsFenced(err) }
	ok := func(err error) bool { return err == nil }
	calls := []struct {
		name      string
		fence     string // "live", "dead" or none
		conv, req string
		want      func(error) bool
	}{
		{"live, its turn", "live", mine[0].ConversationID, mine[0].RequestID, ok},
		{"reaped instance, its turn", "dead", orphan.ConversationID, orphan.RequestID, store.IsFenced},
		{"live, another's turn", "live", orphan.ConversationID, orphan.RequestID, store.IsFenced},
		{"ended turn", "", ended.ConversationID, ended.RequestID, conflict},
		{"not the conversation's turn", "", plain[0].ConversationID, plain[1].RequestID, conflict},
		{"live, its turn again", "live", mine[0].ConversationID, mine[0].RequestID, ok},
		{"live, its second turn", "live", mine[1].ConversationID, mine[1].RequestID, ok},
		{"unfenced", "", plain[1].ConversationID, plain[1].RequestID, ok},
	}

	// Hold the loop on a first batch (its conversation's row locked
	// elsewhere) until every call waits for it: they then make one batch.
	release := lockRow(t, s, blocker.ConversationID)
	obs := &batches{}
	s.Observe(obs)
	first := make(chan error, 1)
	go func() {
		_, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: blocker.ConversationID, RequestID: blocker.RequestID,
			Frames: []store.NewFrame{{Payload: text("first")}}, Now: storetest.Epoch})
		first <- err
	}()
	lockWaits(t, s, 1)
	got := make([][]store.Frame, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			cctx := ctx
			switch c.fence {
			case "live":
				cctx = liveCtx
			case "dead":
				cctx = deadCtx
			}
			got[i], errs[i] = s.AppendFrames(cctx, store.AppendFramesParams{ConversationID: c.conv, RequestID: c.req,
				Frames: []store.NewFrame{{Payload: text(c.name)}, {Payload: text(c.name + ", second frame")}}, Now: storetest.Epoch})
		})
	}
	testutil.Eventually(t, func() bool { return s.AppendsWaiting() == len(calls) }, "every call waits for the loop")
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("first append: %v", err)
	}
	if sizes := obs.get(); !slices.Equal(sizes, []int{1, len(calls)}) {
		t.Fatalf("batches of %v, want [1 %d]", sizes, len(calls))
	}
	for i, c := range calls {
		if !c.want(errs[i]) {
			t.Errorf("%s: err = %v", c.name, errs[i])
		}
		if errs[i] == nil && len(got[i]) != 2 {
			t.Errorf("%s: %d frames returned, want 2", c.name, len(got[i]))
		}
	}
	// What is stored: the instruction (and, for the ended turn, its done
	// frame), then the good appends' frames.
	for conv, want := range map[string]int{mine[0].ConversationID: 5, mine[1].ConversationID: 3, orphan.ConversationID: 1,
		ended.ConversationID: 2, plain[0].ConversationID: 1, plain[1].ConversationID: 3} {
		fs, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: conv})
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != want {
			t.Errorf("conversation %s: %d frames stored, want %d", conv, len(fs), want)
		}
	}
	for i, c := range calls {
		if errs[i] != nil {
			continue
		}
		stored, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: c.conv})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range got[i] {
			if !slices.ContainsFunc(stored, func(s store.Frame) bool {
				return s.Sequence == f.Sequence && string(s.Payload) == string(f.Payload) && s.RequestID == c.req
			}) {
				t.Errorf("%s: returned frame %d is not stored as returned", c.name, f.Sequence)
			}
		}
		if got[i][1].Sequence != got[i][0].Sequence+1 {
			t.Errorf("%s: sequences %d, %d", c.name, got[i][0].Sequence, got[i][1].Sequence)
		}
	}
}

// lockRow locks a conversation's row in a transaction of its own until
// the test ends or the returned function releases it.
func lockRow(t *testing.T, s *Store, convID string) (release func()) {
	t.Helper()
	tx, err := s.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), `SELECT 1 FROM studio_operator_conversations WHERE id = $1 FOR UPDATE`, convID); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback() }) }
	t.Cleanup(release)
	return release
}

// lockWaits waits until n sessions of s's database wait for a lock.
func lockWaits(t *testing.T, s *Store, n int) {
	t.Helper()
	testutil.Eventually(t, func() bool {
		var waiting int
		err := s.db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting == n
	}, n, "sessions waiting for a lock")
}

// TestBatchedAppendsRunAloneWhenTheBatchFails: a batch that cannot write
// (here one of its conversations is locked elsewhere past lock_timeout)
// is rolled back and each of its appends runs alone: the append to the
// free conversation commits, the one to the locked conversation fails
// with a transient error, and nothing is stored twice.
func TestBatchedAppendsRunAloneWhenTheBatchFails(t *testing.T) {
	t.Parallel()
	s := openWith(t, newDatabase(t), Options{appendWriters: 1, LockTimeout: 200 * time.Millisecond})
	ctx := t.Context()
	turns := storetest.ActiveTurns(t, s, 3, storetest.Epoch)
	blocker, locked, free := turns[0], turns[1], turns[2]
	obs := &batches{}
	s.Observe(obs)
	appendTo := func(tr storetest.ActiveTurn, what string) ([]store.Frame, error) {
		return s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: tr.ConversationID, RequestID: tr.RequestID,
			Frames: []store.NewFrame{{Payload: text(what)}}, Now: storetest.Epoch})
	}
	// The loop's first batch waits for the blocker's lock while the two
	// appends queue behind it: they make the second batch.
	release := lockRow(t, s, blocker.ConversationID)
	lockRow(t, s, locked.ConversationID)
	first := make(chan error, 1)
	go func() { _, err := appendTo(blocker, "first"); first <- err }()
	lockWaits(t, s, 1)
	var wg sync.WaitGroup
	var lockedErr, freeErr error
	var freeFrames []store.Frame
	wg.Go(func() { _, lockedErr = appendTo(locked, "to the locked conversation") })
	wg.Go(func() { freeFrames, freeErr = appendTo(free, "to the free conversation") })
	testutil.Eventually(t, func() bool { return s.AppendsWaiting() == 2 }, "both appends wait for the loop")
	release()
	if err := <-first; err != nil {
		t.Fatalf("first append: %v", err)
	}
	wg.Wait()
	if sizes := obs.get(); !slices.Equal(sizes, []int{1, 2}) {
		t.Fatalf("batches of %v, want [1 2]", sizes)
	}
	if freeErr != nil || len(freeFrames) != 1 {
		t.Fatalf("append to the free conversation: %v frames, err %v", len(freeFrames), freeErr)
	}
	if !store.Transient(lockedErr) {
		t.Fatalf("append to the locked conversation: err = %v, want a transient error (lock timeout)", lockedErr)
	}
	for conv, want := range map[string]int{free.ConversationID: 2, locked.ConversationID: 1} {
		fs, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: conv})
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != want {
			t.Errorf("conversation %s: %d frames stored, want %d", conv, len(fs), want)
		}
	}
}
