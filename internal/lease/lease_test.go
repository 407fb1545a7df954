package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/studio/operator/internal/lease"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/sqlite/sqlitetest"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T) *sqlite.Store {
	t.Helper()
	return sqlitetest.Open(t, storetest.Epoch)
}

// reaperFunc is a Reaper from a function.
type reaperFunc func(ctx context.Context, w store.OrphanedWork) error

func (f reaperFunc) ReapOrphans(ctx context.Context, w store.OrphanedWork) error { return f(ctx, w) }

func start(t *testing.T, s store.Store, clock *storetest.Clock, reapers ...lease.Reaper) *lease.Keeper {
	t.Helper()
	k, err := lease.Start(t.Context(), lease.Config{Store: s, Instance: store.Instance{ID: uuid.NewString(), Address: "http://x", PID: 1, Version: "t"},
		Renew: 5 * time.Millisecond, Expiry: time.Second, Reap: true, Reapers: reapers, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return k
}

func instance(t *testing.T, s store.Store, id string) store.Instance {
	t.Helper()
	all, err := s.ListInstances(t.Context(), store.ListInstancesParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range all {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("instance %s not found", id)
	return store.Instance{}
}

func TestRenewAndStop(t *testing.T) {
	t.Parallel()
	s := open(t)
	clock := storetest.NewClock(storetest.Epoch)
	k := start(t, s, clock)
	clock.Advance(500 * time.Millisecond)
	testutil.Eventually(t, func() bool { return k.Stats().Renewals >= 2 }, "a renewal")
	in := instance(t, s, k.ID())
	if in.State(clock.Now()) != store.InstanceLive || !in.LeaseExpiresAt.Equal(clock.Now().Add(time.Second)) {
		t.Fatalf("renewed instance %+v", in)
	}
	// Held until the last renewal's lease runs out (renewals fail or stall).
	if err := k.Held(clock.Now()); err != nil {
		t.Fatalf("Held after renewals: %v", err)
	}
	if err := k.Held(clock.Now().Add(2 * time.Second)); err == nil {
		t.Fatal("Held past the lease's end")
	}
	if err := k.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := k.Held(clock.Now()); err == nil {
		t.Fatal("Held after Stop")
	}
	if st := instance(t, s, k.ID()).State(clock.Now()); st != store.InstanceStopped {
		t.Fatalf("stopped instance is %s", st)
	}
	if k.Stats().Instances != 1 {
		t.Fatalf("live instances = %d", k.Stats().Instances)
	}
}

func TestExpiryMustExceedRenew(t *testing.T) {
	t.Parallel()
	_, err := lease.Start(t.Context(), lease.Config{Store: open(t), Instance: store.Instance{ID: "x"}, Renew: time.Second, Expiry: time.Second})
	if err == nil {
		t.Fatal("a lease that expires before it is renewed was accepted")
	}
}

// TestDeadDaemonReapedAndLeaseLost: a daemon whose clock stopped (as if
// it hung) lets its lease expire; another daemon's reaper reaps it and
// hands its running turn to the reapers, once; the hung daemon's next
// renewal finds out and Lost closes.
func TestDeadDaemonReapedAndLeaseLost(t *testing.T) {
	t.Parallel()
	s := open(t)
	frozen := storetest.NewClock(storetest.Epoch)
	hung := start(t, s, frozen)
	// The hung daemon owns a running turn.
	ctx := t.Context()
	conv, _ := s.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: storetest.Epoch})
	tr, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: conv.ID, RequestID: uuid.NewString(), Instruction: "go",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch, Instance: hung.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartTurn(ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: storetest.Epoch, Instance: hung.ID()}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var handed []string
	reaper := reaperFunc(func(ctx context.Context, w store.OrphanedWork) error {
		mu.Lock()
		defer mu.Unlock()
		for _, t := range w.Turns {
			handed = append(handed, t.RequestID)
		}
		return nil
	})
	live := storetest.NewClock(storetest.Epoch.Add(time.Minute))
	other := start(t, s, live, reaper)
	// A daemon reaps only once it has seen the database for a whole
	// lease expiry.
	live.Advance(time.Hour)
	select {
	case <-hung.Lost():
	case <-time.After(testutil.Patience):
		t.Fatal("the hung daemon never learned it lost its lease")
	}
	if hung.Err() == nil || other.Err() != nil {
		t.Fatalf("Err: hung %v, other %v", hung.Err(), other.Err())
	}
	if hung.Held(frozen.Now()) == nil || other.Held(live.Now()) != nil {
		t.Fatalf("Held: hung %v, other %v", hung.Held(frozen.Now()), other.Held(live.Now()))
	}
	if st := instance(t, s, hung.ID()).State(live.Now()); st != store.InstanceReaped {
		t.Fatalf("hung instance is %s", st)
	}
	// The reaper hands the work over after the reaping that the hung
	// daemon's renewal saw.
	var got []string
	testutil.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		got = append([]string(nil), handed...)
		return len(got) > 0
	}, "the hung daemon's work handed over")
	if got[0] != tr.RequestID {
		t.Fatalf("reapers were handed %v, want the hung daemon's turn", got)
	}
	if other.Stats().Reaped != 1 {
		t.Fatalf("reaped %d instances", other.Stats().Reaped)
	}
}

// outageStore is a store whose database can go away: every call of the
// keeper fails while down is set.
type outageStore struct {
	store.Store
	down atomic.Bool
}

var errDown = errors.New("connection refused")

func (s *outageStore) RenewLease(ctx context.Context, p store.RenewLeaseParams) (store.Instance, error) {
	if s.down.Load() {
		return store.Instance{}, errDown
	}
	return s.Store.RenewLease(ctx, p)
}

func (s *outageStore) ReapInstances(ctx context.Context, p store.ReapInstancesParams) ([]store.Instance, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.ReapInstances(ctx, p)
}

// TestNoReapingRightAfterAnOutage: after the database was away, every
// other lease looks expired; a daemon whose renewals work again reaps
// nobody until it has seen the database for a whole lease expiry (the
// others renew theirs meanwhile), then reaps the one that stayed dead.
func TestNoReapingRightAfterAnOutage(t *testing.T) {
	t.Parallel()
	s := &outageStore{Store: open(t)}
	clock := storetest.NewClock(storetest.Epoch)
	other := store.Instance{ID: "other", Address: "x", PID: 2, Version: "t", StartedAt: storetest.Epoch.Add(-time.Hour),
		HeartbeatAt: storetest.Epoch.Add(-time.Hour), LeaseExpiresAt: storetest.Epoch.Add(-time.Minute)}
	if _, err := s.RegisterInstance(t.Context(), store.RegisterInstanceParams{Instance: other}); err != nil {
		t.Fatal(err)
	}
	s.down.Store(true)
	k, err := lease.Start(t.Context(), lease.Config{Store: s, Instance: store.Instance{ID: uuid.NewString(), Address: "http://x", PID: 1, Version: "t"},
		Renew: 5 * time.Millisecond, Expiry: time.Second, Reap: true, Now: clock.Now})
	if err == nil {
		t.Cleanup(func() { _ = k.Stop(context.Background()) })
	} else {
		// Registration needs the database: start while it answers, then lose it.
		s.down.Store(false)
		k = start(t, s, clock)
		s.down.Store(true)
	}
	testutil.Eventually(t, func() bool { return k.Stats().RenewFailures >= 2 }, "failed renewals")
	clock.Advance(time.Hour) // the outage lasted long: every lease expired
	s.down.Store(false)
	before := k.Stats().Renewals
	testutil.Eventually(t, func() bool { return k.Stats().Renewals >= before+5 }, "renewals again")
	if st := instance(t, s, other.ID).State(clock.Now()); st != store.InstanceExpired {
		t.Fatalf("right after the outage the other instance is %s, want expired and not reaped", st)
	}
	// A lease later it is reaped. The clock moves on at each look: on a
	// loaded machine a renewal may miss its deadline, and the whole
	// expiry of renewals is counted again from the next one that works.
	testutil.Eventually(t, func() bool {
		clock.Advance(time.Second)
		return instance(t, s, other.ID).State(clock.Now()) == store.InstanceReaped
	}, "the dead instance reaped a lease after the outage")
}

// stuckReapStore is a store whose reaping hangs while stuck is set (a
// takeover waiting on a stalled daemon's locks) until its deadline.
type stuckReapStore struct {
	store.Store
	stuck   atomic.Bool
	entered chan struct{} // closed at the first reaping that hangs
	once    sync.Once
	release chan struct{}
}

func (s *stuckReapStore) ReapInstances(ctx context.Context, p store.ReapInstancesParams) ([]store.Instance, error) {
	if s.stuck.Load() {
		s.once.Do(func() { close(s.entered) })
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.ReapInstances(ctx, p)
}

// TestStuckReapingDoesNotHoldUpRenewals: the reaper's look hangs (for
// as long as its deadline, which is at least the lease expiry); the
// daemon's own renewals go on meanwhile, so its lease never lapses
// because it was busy taking another's work over.
func TestStuckReapingDoesNotHoldUpRenewals(t *testing.T) {
	t.Parallel()
	s := &stuckReapStore{Store: open(t), entered: make(chan struct{}), release: make(chan struct{})}
	clock := storetest.NewClock(storetest.Epoch)
	s.stuck.Store(true)
	k := start(t, s, clock)
	t.Cleanup(func() { close(s.release) }) // before the keeper's Stop
	clock.Advance(time.Second)             // healthy for a whole expiry: the reaper looks
	select {
	case <-s.entered:
	case <-time.After(testutil.Patience):
		t.Fatal("the reaper never looked")
	}
	before := k.Stats().Renewals
	// A renewal every 5 ms: twenty take 100 ms; behind a hung reaping
	// (10 s each) they would take minutes.
	testutil.Eventually(t, func() bool { return k.Stats().Renewals >= before+20 }, "renewals while the reaping hangs")
	if err := k.Held(clock.Now()); err != nil {
		t.Fatalf("Held while the reaping hangs: %v", err)
	}
}

// TestChangedWhenTheLeaseCannotBeProven: Changed wakes its watchers when
// the renewals failed past the lease's end (Held then says so), and again
// when a renewal succeeds.
func TestChangedWhenTheLeaseCannotBeProven(t *testing.T) {
	t.Parallel()
	s := &outageStore{Store: open(t)}
	clock := storetest.NewClock(storetest.Epoch)
	k := start(t, s, clock)
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(testutil.Patience):
			t.Fatalf("Changed never woke: %s", what)
		}
	}
	ch := k.Changed()
	s.down.Store(true)
	clock.Advance(2 * time.Second) // past the last renewal's lease
	wait(ch, "the lease ran out unrenewed")
	if err := k.Held(clock.Now()); err == nil {
		t.Fatal("Held after the lease ran out unrenewed")
	}
	ch = k.Changed()
	s.down.Store(false)
	wait(ch, "renewed again")
	if err := k.Held(clock.Now()); err != nil {
		t.Fatalf("Held once renewed: %v", err)
	}
}
