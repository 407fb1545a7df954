package turnstats_test

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/turnstats"
)

// The ring keeps the newest turn ends and model failures and buckets them
// by when they were observed; Observers hands each event to every observer.
func TestRecentActivity(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(storetest.Epoch)
	r := turnstats.New(3, clock.Now)
	other := turnstats.New(10, clock.Now)
	obs := coordinator.Observers(r, other)
	turn := func(d time.Duration, outcome protocol.Outcome) {
		obs.TurnEnded(coordinator.TurnEnded{Duration: d, Outcome: outcome})
	}
	turn(time.Hour, protocol.OutcomeCompleted) // pushed out of the 3-slot ring below
	clock.Advance(10 * time.Minute)
	turn(2*time.Second, protocol.OutcomeCompleted)
	turn(4*time.Second, protocol.OutcomeFailed)
	obs.ModelAttempt(coordinator.ModelAttempt{ErrorCode: protocol.RateLimited, Retried: true})
	obs.ModelAttempt(coordinator.ModelAttempt{}) // a success is no failure
	clock.Advance(30 * time.Minute)
	turn(time.Second, protocol.OutcomeCompleted)
	obs.ModelAttempt(coordinator.ModelAttempt{ErrorCode: protocol.ModelFailure})

	a := r.Activity(12, 5*time.Minute) // the last hour
	if len(a.Buckets) != 12 || a.Kept.Turns != 3 || a.Kept.Failures != 2 {
		t.Fatalf("activity = %+v", a)
	}
	var turns, failed int
	errs := map[string]int{}
	for _, b := range a.Buckets {
		turns += b.Turns
		failed += b.Failed
		for k, v := range b.ModelErrors {
			errs[k] += v
		}
	}
	if turns != 3 || failed != 1 || errs["rate_limited"] != 1 || errs["model_failure"] != 1 {
		t.Fatalf("turns %d failed %d errors %v", turns, failed, errs)
	}
	// 10 minutes after the start, 30 minutes before now: the 7th interval of the hour.
	b := a.Buckets[6]
	if b.Turns != 2 || *b.MedianMs != 4000 || *b.MaxMs != 4000 || b.ModelErrors["rate_limited"] != 1 {
		t.Fatalf("bucket 30 minutes ago = %+v", b)
	}
	if last := a.Buckets[11]; last.Turns != 1 || *last.MedianMs != 1000 {
		t.Fatalf("the newest bucket = %+v", last)
	}
	if o := other.Activity(12, 5*time.Minute); o.Kept.Turns != 4 {
		t.Fatalf("the second observer kept %d turns, want 4", o.Kept.Turns)
	}
}
