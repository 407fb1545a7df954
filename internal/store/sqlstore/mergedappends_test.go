package sqlstore_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// runningOn registers nothing: it submits and starts a turn owned by
// instance on a new conversation.
func runningOn(t *testing.T, s store.Store, instance string) storetest.ActiveTurn {
	t.Helper()
	c, err := s.CreateConversation(t.Context(), store.CreateConversationParams{ID: uuid.NewString(), Now: storetest.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	rid := uuid.NewString()
	if _, _, err := s.SubmitTurn(t.Context(), store.SubmitTurnParams{ConversationID: c.ID, RequestID: rid, Instruction: "x",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch, Instance: instance}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartTurn(t.Context(), store.StartTurnParams{RequestID: rid, Now: storetest.Epoch, Instance: instance}); err != nil {
		t.Fatal(err)
	}
	return storetest.ActiveTurn{ConversationID: c.ID, RequestID: rid}
}

func register(t *testing.T, s store.Store, lease time.Duration) string {
	t.Helper()
	id := uuid.NewString()
	if _, err := s.RegisterInstance(t.Context(), store.RegisterInstanceParams{Instance: store.Instance{ID: id,
		Address: "http://127.0.0.1:8765", PID: 1, Version: "test", StartedAt: storetest.Epoch, HeartbeatAt: storetest.Epoch,
		LeaseExpiresAt: storetest.Epoch.Add(lease)}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestGroupCommitMergedAppendsFailAlone: the appends of one batch are
// merged into shared statements, yet each keeps its own answer. In one
// batch, appends fenced out (a reaped instance; a live instance appending
// to a turn it does not own) and one to a turn that is not active fail,
// each with its own error and writing nothing; the good ones beside
// them, two of them to the same conversation, all commit with consecutive
// sequences.
func TestGroupCommitMergedAppendsFailAlone(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	live := register(t, s, time.Hour)
	dead := register(t, s, -time.Second)
	if _, err := s.ReapInstances(t.Context(), store.ReapInstancesParams{Now: storetest.Epoch, Except: live}); err != nil {
		t.Fatal(err)
	}
	mine := []storetest.ActiveTurn{runningOn(t, s, live), runningOn(t, s, live), runningOn(t, s, live)}
	orphan := runningOn(t, s, dead) // the reaped instance's turn, not yet adopted
	plain := storetest.ActiveTurns(t, s, 2, storetest.Epoch)
	liveCtx := store.WithFence(t.Context(), store.Fence{Instance: live})
	deadCtx := store.WithFence(t.Context(), store.Fence{Instance: dead})

	type call struct {
		name    string
		ctx     bool // fenced by the live instance (else by none, or dead below)
		dead    bool
		conv    string
		req     string
		wantErr func(error) bool
	}
	ok := func(err error) bool { return err == nil }
	calls := []call{
		{name: "live, its turn", ctx: true, conv: mine[0].ConversationID, req: mine[0].RequestID, wantErr: ok},
		{name: "reaped instance", dead: true, conv: orphan.ConversationID, req: orphan.RequestID, wantErr: store.IsFenced},
		{name: "live, its second turn", ctx: true, conv: mine[1].ConversationID, req: mine[1].RequestID, wantErr: ok},
		// Another conversation's turn: a row the frame's request may
		// name, so only the check can refuse it.
		{name: "not the active turn", conv: plain[0].ConversationID, req: plain[1].RequestID,
			wantErr: func(err error) bool { return protocol.IsCode(err, protocol.Conflict) && !store.IsFenced(err) }},
		{name: "live, another's turn", ctx: true, conv: orphan.ConversationID, req: orphan.RequestID, wantErr: store.IsFenced},
		{name: "live, its first turn again", ctx: true, conv: mine[0].ConversationID, req: mine[0].RequestID, wantErr: ok},
		{name: "unfenced", conv: plain[1].ConversationID, req: plain[1].RequestID, wantErr: ok},
		{name: "live, its third turn", ctx: true, conv: mine[2].ConversationID, req: mine[2].RequestID, wantErr: ok},
	}
	good := 0
	for _, c := range calls {
		if c.wantErr(nil) {
			good++
		}
	}
	gatherAll(t, s, len(calls))
	var batch int
	sqlstore.SetBeforeCommitHook(s.Store, func(ran int) error {
		if batch == 0 {
			batch = ran
		}
		return nil
	})
	got := make([][]store.Frame, len(calls))
	errs := allAtOnce(len(calls), func(i int) error {
		c := calls[i]
		ctx := t.Context()
		switch {
		case c.ctx:
			ctx = liveCtx
		case c.dead:
			ctx = deadCtx
		}
		fs, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: c.conv, RequestID: c.req,
			Frames: append(text(c.name), text(c.name+", second frame")...), Now: storetest.Epoch})
		got[i] = fs
		return err
	})
	if batch != good {
		t.Fatalf("%d appends of the batch ran to the commit, want the %d good ones", batch, good)
	}
	for i, c := range calls {
		if !c.wantErr(errs[i]) {
			t.Errorf("%s: err = %v", c.name, errs[i])
		}
		if errs[i] == nil && len(got[i]) != 2 {
			t.Errorf("%s: %d frames returned, want 2", c.name, len(got[i]))
		}
	}
	// What is stored: the instruction, then the good appends' frames.
	wantStored(t, s, 0, mine[0].ConversationID, 5)
	wantStored(t, s, 1, mine[1].ConversationID, 3)
	wantStored(t, s, 2, mine[2].ConversationID, 3)
	wantStored(t, s, 3, orphan.ConversationID, 1)
	wantStored(t, s, 4, plain[0].ConversationID, 1)
	wantStored(t, s, 5, plain[1].ConversationID, 3)
	// Each good append got the sequences it stored, its two frames
	// consecutive.
	for i, c := range calls {
		if errs[i] != nil {
			continue
		}
		stored, err := s.ListFrames(t.Context(), store.ListFramesParams{ConversationID: c.conv})
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

// TestGroupCommitMergedWriteFailureRunsAppendsAlone: when the merged
// writes of a batch's appends fail, the batch's transaction is rolled back
// and each append runs alone in a new one: every caller is answered for
// its own append, and nothing is stored twice.
func TestGroupCommitMergedWriteFailureRunsAppendsAlone(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	const n = 6
	turns := storetest.ActiveTurns(t, s, n, storetest.Epoch)
	gatherAll(t, s, n)
	merged, batch := 0, 0
	sqlstore.SetAfterMergedHook(s.Store, func(ran int) error {
		merged = ran
		return errors.New("injected failure of the merged writes")
	})
	sqlstore.SetBeforeCommitHook(s.Store, func(ran int) error {
		if batch == 0 {
			batch = ran
		}
		return nil
	})
	errs := appendAll(t.Context(), s, turns, func(i int) string { return turns[i].RequestID }, func(int) []store.NewFrame { return text("once") })
	if merged != n || batch != n {
		t.Fatalf("merged %d appends, %d ran to the commit; want %d and %d", merged, batch, n, n)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	for i, tn := range turns {
		wantStored(t, s, i, tn.ConversationID, 2)
	}
}

// TestGroupCommitMergedAppendsAdvanceEachConversation: one batch's appends
// to more conversations than one multi-row statement holds (524 rows:
// eight statements of 64, three of 4)
// advance every conversation's sequence past its frames once, with the
// time of its append, and a conversation appended to twice in the batch
// advances past both appends.
func TestGroupCommitMergedAppendsAdvanceEachConversation(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	const n = 261
	turns := storetest.ActiveTurns(t, s, n, storetest.Epoch)
	calls := append(slices.Clone(turns), turns[7]) // the eighth twice
	at := func(i int) time.Time { return storetest.Epoch.Add(time.Duration(min(i, 7)+1) * time.Minute) }
	gatherAll(t, s, len(calls))
	batch := 0
	sqlstore.SetBeforeCommitHook(s.Store, func(ran int) error {
		if batch == 0 {
			batch = ran
		}
		return nil
	})
	errs := allAtOnce(len(calls), func(i int) error {
		_, err := s.AppendFrames(t.Context(), store.AppendFramesParams{ConversationID: calls[i].ConversationID, RequestID: calls[i].RequestID,
			Frames: append(text("one"), text("two")...), Now: at(i)})
		return err
	})
	if batch != len(calls) {
		t.Fatalf("%d appends ran to the batch's commit, want %d", batch, len(calls))
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	for i, c := range turns {
		want := 3 // the instruction, then two frames
		if i == 7 {
			want = 5
		}
		wantStored(t, s, i, c.ConversationID, want)
		conv, err := s.GetConversation(t.Context(), c.ConversationID)
		if err != nil {
			t.Fatal(err)
		}
		if !conv.UpdatedAt.Equal(at(i)) {
			t.Errorf("conversation %d updated at %v, want %v", i, conv.UpdatedAt, at(i))
		}
	}
}

// TestGroupCommitMergedWriteFailureAfterAnotherTransaction: the merged
// writes run in no savepoint, so when they fail after another logical
// transaction of the batch ran, that transaction fails with the batch's
// (nothing of it is stored, as when a commit fails), and the appends run
// alone in a new transaction, each caller answered for its own.
func TestGroupCommitMergedWriteFailureAfterAnotherTransaction(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	const n = 4
	turns := storetest.ActiveTurns(t, s, n, storetest.Epoch)
	taken := make(chan struct{})
	var once sync.Once
	sqlstore.SetGatherHook(s.Store, func() {
		once.Do(func() {
			close(taken) // the conversation's creation is the batch's first
			testutil.Eventually(t, func() bool { return sqlstore.Waiting(s.Store) >= n }, "the appends waiting behind it")
		})
	})
	injected := errors.New("injected failure of the merged writes")
	merged := 0
	sqlstore.SetAfterMergedHook(s.Store, func(ran int) error {
		merged = ran
		return injected
	})
	convID := uuid.NewString()
	created := make(chan error, 1)
	go func() {
		_, err := s.CreateConversation(t.Context(), store.CreateConversationParams{ID: convID, Now: storetest.Epoch})
		created <- err
	}()
	<-taken
	errs := appendAll(t.Context(), s, turns, func(i int) string { return turns[i].RequestID }, func(int) []store.NewFrame { return text("once") })
	if err := <-created; !errors.Is(err, injected) {
		t.Errorf("the transaction before the appends: err = %v, want the batch's failure", err)
	}
	if merged != n {
		t.Fatalf("merged %d appends, want %d", merged, n)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	for i, tn := range turns {
		wantStored(t, s, i, tn.ConversationID, 2)
	}
	if _, err := s.GetConversation(t.Context(), convID); !protocol.IsCode(err, protocol.NotFound) {
		t.Errorf("the conversation of the failed transaction: err = %v, want not found", err)
	}
}
