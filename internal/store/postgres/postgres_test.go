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
	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// openAt opens and migrates a store on the database at url, closed when tb ends.
func openAt(tb testing.TB, url string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), url)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	if _, err := s.Migrate(context.Background(), storetest.Epoch); err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	return s
}

// mustOpen opens a store on a fresh database.
func mustOpen(tb testing.TB) *Store {
	tb.Helper()
	return openAt(tb, newDatabase(tb))
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Store { return mustOpen(t) })
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	s := mustOpen(t) // migrated once (and its template before it)
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		v, err := s.Migrate(t.Context(), storetest.Epoch.Add(time.Hour))
		if err != nil || v != len(ms) {
			t.Fatalf("Migrate again = %d, %v; want %d", v, err, len(ms))
		}
	}
	var rows int
	var applied float64
	if err := s.db.QueryRowContext(t.Context(), `SELECT COUNT(*), MAX(applied_at) FROM schema_migrations`).Scan(&rows, &applied); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) || applied != protocol.Timestamp(storetest.Epoch) {
		t.Fatalf("schema_migrations has %d rows applied at %v, want %d at %v (double precision)", rows, applied, len(ms), protocol.Timestamp(storetest.Epoch))
	}
}

// TestMigrateFresh: daemons that start together on an empty database take
// turns (an advisory lock) and all end at the latest version.
func TestMigrateFresh(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	s := openAt(t, url) // the copy of the template is migrated: empty it
	if _, err := s.db.ExecContext(t.Context(), `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	ms, _ := Migrations()
	stores := []*Store{s}
	for range 3 {
		o, err := Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		stores = append(stores, o)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, st := range stores {
		wg.Go(func() { _, errs[i] = st.Migrate(t.Context(), storetest.Epoch) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("store %d: Migrate: %v", i, err)
		}
	}
	if v, err := s.SchemaVersion(t.Context()); err != nil || v != len(ms) {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, len(ms))
	}
}

// TestAdminEventsAppendOnly: the database itself refuses to change or remove
// audit rows, whatever client asks.
func TestAdminEventsAppendOnly(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	ctx := t.Context()
	e, err := s.AppendAdminEvent(ctx, store.AppendAdminEventParams{Actor: "a", Action: "x", Now: storetest.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE admin_events SET actor = 'mallory' WHERE id = $1`,
		`DELETE FROM admin_events WHERE id = $1`,
		`TRUNCATE admin_events`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, e.ID)
		}
		_, err := s.db.ExecContext(ctx, q, args...)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: err = %v, want the append-only refusal", q, err)
		}
	}
	got, err := s.ListAdminEvents(ctx, store.ListAdminEventsParams{})
	if err != nil || len(got) != 1 || got[0].Actor != "a" {
		t.Fatalf("admin events after refused changes = %+v, %v", got, err)
	}
}

// TestTimestampsExact: microsecond timestamps come back equal, and a
// cursor of equal created_at values pages without skipping or repeating.
func TestTimestampsExact(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	ctx := t.Context()
	at := time.Date(2038, time.January, 19, 3, 14, 7, 999_999_000, time.UTC) // the last microsecond of a second
	var want []string
	for range 5 {
		c, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: at})
		if err != nil {
			t.Fatal(err)
		}
		if !c.CreatedAt.Equal(at) {
			t.Fatalf("created_at = %v, want %v", c.CreatedAt, at)
		}
		want = append(want, c.ID)
	}
	slices.Sort(want)
	slices.Reverse(want)
	var got []string
	p := store.ListConversationsParams{Limit: 2}
	for range 5 {
		page, err := s.ListConversations(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			got = append(got, c.ID)
		}
		last := page[len(page)-1]
		p.AfterCreated, p.AfterID = &last.CreatedAt, last.ID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
}

// TestTwoInstances: two Stores on one database, as two daemons would have.
// Sequences stay unique and gap-free under concurrent appends from both,
// the active-request compare-and-set and ticket redemption hold across
// them, and a commit by one wakes the other's streams.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openAt(t, url), openAt(t, url)
	ctx := t.Context()
	clock := storetest.NewClock(storetest.Epoch)
	conv, err := a.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}

	// Exactly one of two submissions, one through each instance, wins.
	params := make([]store.SubmitTurnParams, 2)
	for i := range params {
		params[i] = store.SubmitTurnParams{ConversationID: conv.ID, RequestID: uuid.NewString(), Instruction: "go",
			ContextJSON: []byte(`{}`), ContextHash: "h", Now: clock.Now()}
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, st := range []*Store{a, b} {
		wg.Go(func() { _, _, errs[i] = st.SubmitTurn(ctx, params[i]) })
	}
	wg.Wait()
	var winner string
	for i, err := range errs {
		switch {
		case err == nil && winner == "":
			winner = params[i].RequestID
		case protocol.IsCode(err, protocol.Conflict):
		default:
			t.Fatalf("submissions: %v", errs)
		}
	}
	if winner == "" {
		t.Fatalf("no submission won: %v", errs)
	}

	// A signal taken on a wakes on b's commit, and b's on a's.
	for _, pair := range [][2]*Store{{a, b}, {b, a}} {
		sig := pair[0].FrameSignal(conv.ID)
		if _, err := pair[1].AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv.ID, RequestID: winner,
			Frames: []store.NewFrame{{Payload: text("across")}}, Now: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, sig)
	}

	// Concurrent batches through both instances.
	const writers = 40
	batches := make([][]store.Frame, writers)
	for i := range writers {
		st := []*Store{a, b}[i%2]
		wg.Go(func() {
			payloads := make([]store.NewFrame, 1+i%3)
			for j := range payloads {
				payloads[j] = store.NewFrame{Payload: text(fmt.Sprintf("w%d-%d", i, j))}
			}
			fs, err := st.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv.ID, RequestID: winner, Frames: payloads, Now: clock.Now()})
			if err != nil {
				t.Error(err)
			}
			batches[i] = fs
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i, fs := range batches {
		for j, f := range fs {
			if f.Sequence != fs[0].Sequence+int64(j) {
				t.Fatalf("writer %d's batch is not contiguous: %d at %d", i, f.Sequence, j)
			}
			if seen[f.Sequence] {
				t.Fatalf("sequence %d given twice", f.Sequence)
			}
			seen[f.Sequence] = true
		}
	}
	stored, err := b.ListFrames(ctx, store.ListFramesParams{ConversationID: conv.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range stored {
		if f.Sequence != int64(i+1) {
			t.Fatalf("stored frame %d has sequence %d: a gap or a duplicate", i, f.Sequence)
		}
	}
	if got := a.getConv(t, conv.ID); got.NextSequence != int64(len(stored))+1 {
		t.Fatalf("next_sequence = %d with %d frames stored", got.NextSequence, len(stored))
	}

	// A ticket redeems once, whichever instance is asked.
	now := clock.Now()
	hash := uuid.NewString()
	if err := a.CreateStreamTicket(ctx, store.CreateStreamTicketParams{TicketHash: hash, ConversationID: conv.ID,
		ExpiresAt: now.Add(time.Minute), Now: now}); err != nil {
		t.Fatal(err)
	}
	redeemed := make([]error, 10)
	for i := range redeemed {
		st := []*Store{a, b}[i%2]
		wg.Go(func() {
			_, redeemed[i] = st.RedeemStreamTicket(ctx, store.RedeemStreamTicketParams{TicketHash: hash, Now: now})
		})
	}
	wg.Wait()
	if n := len(slices.DeleteFunc(redeemed, func(err error) bool { return err != nil })); n != 1 {
		t.Fatalf("%d redemptions succeeded, want 1", n)
	}
}

// TestListenerReconnects: when the listening connection is cut, the Store
// reconnects and wakes its streams, so no commit made meanwhile is missed.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openAt(t, url), openAt(t, url)
	ctx := t.Context()
	conv, err := b.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: storetest.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	sig := a.FrameSignal(conv.ID)
	// Cut every listening connection of this database, then commit on b.
	var cut int
	if err := b.db.QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&cut); err != nil || cut != 2 {
		t.Fatalf("terminated %d listeners (%v), want 2", cut, err)
	}
	if _, _, err := b.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: conv.ID, RequestID: uuid.NewString(),
		Instruction: "go", ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig)
	// Listening again: the next commit by b reaches a.
	testutil.Eventually(t, func() bool {
		var n int
		if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 2
	}, "two listeners")
	sig = a.FrameSignal(conv.ID)
	c := b.getConv(t, conv.ID)
	if _, err := b.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv.ID, RequestID: *c.ActiveRequestID,
		Frames: []store.NewFrame{{Payload: text("after")}}, Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig)
}

func text(s string) protocol.TextPayload {
	return protocol.TextPayload{Content: s, Format: "plain", Role: protocol.RoleAssistant}
}

func (s *Store) getConv(t *testing.T, id string) store.Conversation {
	t.Helper()
	c, err := s.GetConversation(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitClosed waits for a signal that another process's commit closes: it
// arrives asynchronously, so this waits; the deadline only stops a hung test.
func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testutil.Patience):
		t.Fatal("frame signal never closed")
	}
}

// TestOpenOptions: pool_max_conns in the URL bounds the pool (as with
// pgxpool); an unreachable server fails Open rather than the first query.
func TestOpenOptions(t *testing.T) {
	t.Parallel()
	s := openAt(t, newDatabase(t)+"&pool_max_conns=3")
	if n := s.db.Stats().MaxOpenConnections; n != 3 {
		t.Fatalf("MaxOpenConnections = %d, want 3", n)
	}
	if s := mustOpen(t); s.db.Stats().MaxOpenConnections != DefaultMaxConns {
		t.Fatalf("default MaxOpenConnections = %d", s.db.Stats().MaxOpenConnections)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := Open(t.Context(), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=5", port)); err == nil {
		st.Close()
		t.Fatal("Open of a port where nothing listens succeeded")
	}
}

// TestFeedAcrossInstances: a stream on one daemon gets, from memory, the
// frames another daemon commits (its NOTIFY makes one read per
// conversation), interleaved with this daemon's own commits, in order and
// each once; what the window lost to a race is read from the store.
func TestFeedAcrossInstances(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openAt(t, url), openAt(t, url)
	ctx := t.Context()
	turn := storetest.ActiveTurns(t, b, 1, storetest.Epoch)[0]
	conv, rid := store.Conversation{ID: turn.ConversationID}, turn.RequestID
	sub := a.Subscribe(conv.ID)
	defer sub.Close()
	after := a.getConv(t, conv.ID).LastSequence()
	// b's commits, one at a time: each reaches a's subscriber from memory.
	for i := range 5 {
		if evs, behind := sub.Next(after, nil, 10); len(evs) != 0 || behind {
			t.Fatalf("before write %d: %d events, behind %v", i, len(evs), behind)
		}
		if _, err := b.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv.ID, RequestID: rid,
			Frames: []store.NewFrame{{Payload: text("from b")}}, Now: storetest.Epoch}); err != nil {
			t.Fatal(err)
		}
		var evs []feed.Event
		var behind bool
		for len(evs) == 0 && !behind { // a wake-up may come for nothing new
			select {
			case <-sub.Ready():
			case <-time.After(testutil.Patience):
				t.Fatalf("write %d by b never reached a's subscriber", i)
			}
			evs, behind = sub.Next(after, nil, 10)
		}
		if behind || len(evs) != 1 || evs[0].Sequence != after+1 {
			t.Fatalf("write %d by b: %+v, behind %v", i, evs, behind)
		}
		after++
	}
	// Then both daemons at once: in order and each once, from memory
	// where the window has it and from the store where it lost it.
	const writes = 30
	var wg sync.WaitGroup
	for i := range writes {
		st := []*Store{b, a, b}[i%3]
		wg.Go(func() {
			if _, err := st.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv.ID, RequestID: rid,
				Frames: []store.NewFrame{{Payload: text(fmt.Sprintf("w%d", i))}}, Now: storetest.Epoch}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	end := after + writes
	for after < end {
		evs, behind := sub.Next(after, nil, 100)
		switch {
		case behind:
			fs, err := a.ListFrames(ctx, store.ListFramesParams{ConversationID: conv.ID, AfterSequence: after, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if f.Sequence != after+1 {
					t.Fatalf("store gave %d after %d", f.Sequence, after)
				}
				after = f.Sequence
			}
		case len(evs) == 0:
			select {
			case <-sub.Ready():
			case <-time.After(testutil.Patience):
				t.Fatalf("no wake-up at sequence %d of %d", after, end)
			}
		default:
			for _, e := range evs {
				if e.Sequence != after+1 {
					t.Fatalf("feed gave %d after %d", e.Sequence, after)
				}
				after = e.Sequence
			}
		}
	}
}

// TestIdentityUpgrade: principals get their origin from the audit of
// their creation (storetest.ExerciseIdentityUpgrade).
func TestIdentityUpgrade(t *testing.T) {
	t.Parallel()
	s := openAt(t, newDatabase(t))
	if _, err := s.db.ExecContext(t.Context(), `DROP SCHEMA public CASCADE; CREATE SCHEMA public;
		CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := sqlstore.Migrate(t.Context(), s.db, dialect{}, ms[:storetest.IdentityUpgradeFrom], storetest.Epoch); err != nil || v != storetest.IdentityUpgradeFrom {
		t.Fatalf("migrate to %d: %d, %v", storetest.IdentityUpgradeFrom, v, err)
	}
	storetest.ExerciseIdentityUpgrade(t, s,
		func(ctx context.Context, q string) error { _, err := s.db.ExecContext(ctx, q); return err },
		func(ctx context.Context) error { _, err := s.Migrate(ctx, storetest.Epoch); return err })
}
