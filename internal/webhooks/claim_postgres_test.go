package webhooks_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/postgres"
	"github.com/studio/operator/internal/store/postgres/pgtest"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
	"github.com/studio/operator/internal/webhooks"
)

// TestTwoDaemonsDeliverEachOnce: two dispatchers, each on its own
// connection pool to one PostgreSQL database (two daemons), deliver
// together; every delivery is posted by one of them, once.
func TestTwoDaemonsDeliverEachOnce(t *testing.T) {
	t.Parallel()
	srv := pgtest.New(t)
	url := srv.NewDatabase(t, "")
	open := func() store.Store {
		s, err := postgres.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Migrate(t.Context(), storetest.Epoch); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	clock := storetest.NewClock(storetest.Epoch)
	rcv := newReceiver(t)
	// The first answers wait until four posts are in flight: more than one
	// dispatcher's Concurrency, so both hold claims at once.
	var inflight atomic.Int64
	both := make(chan struct{})
	var once sync.Once
	rcv.hold = func() {
		if inflight.Add(1) >= 4 {
			once.Do(func() { close(both) })
		}
		select {
		case <-both:
		case <-time.After(testutil.Patience): // a safety net; the count below fails
		}
	}
	addWebhook(t, a, rcv.srv.URL, store.FormatStandard, clock)
	addWebhook(t, a, rcv.srv.URL, store.FormatStandard, clock)
	ev := events{t, a, clock}
	const turns = 15
	for range turns {
		ev.failTurn()
	}
	var wg sync.WaitGroup
	attempts := make([]int, 2)
	for i, s := range []store.Store{a, b} {
		d := webhooks.New(webhooks.Config{Store: s, Instance: []string{"a", "b"}[i], Client: rcv.srv.Client(), Now: clock.Now, Concurrency: 3})
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := d.DeliverDue(t.Context())
			if err != nil {
				t.Error(err)
			}
			attempts[i] = n
		}()
	}
	wg.Wait()
	ids := map[string]int{}
	for _, r := range rcv.accepted() {
		ids[r.id]++
	}
	if len(ids) != 2*turns {
		t.Fatalf("%d distinct deliveries received, want %d", len(ids), 2*turns)
	}
	for id, n := range ids {
		if n != 1 {
			t.Fatalf("delivery %s posted %d times", id, n)
		}
	}
	if attempts[0]+attempts[1] != 2*turns {
		t.Fatalf("attempts %v, want %d in all", attempts, 2*turns)
	}
	if attempts[0] == 0 || attempts[1] == 0 {
		t.Fatalf("attempts %v: one dispatcher did all", attempts)
	}
}
