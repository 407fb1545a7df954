package coordinator_test

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/testutil"
)

// chatter streams ("talk") 100 small text frames with pauses, long enough for a
// store outage to land in the middle of it.
func chatter() *script.Script {
	var steps []script.Step
	for range 100 {
		steps = append(steps, script.Step{Text: ptr("word ")}, script.Step{SleepMs: ptr(int64(1))})
	}
	return &script.Script{Turns: []script.Turn{{Match: "talk", Steps: steps}, {Steps: []script.Step{{Text: ptr("ok")}}}}}
}

// Every write of the coordinator fails for a while in the middle
// of streaming turns (a locked or full database). After the fault clears,
// every accepted turn ends in exactly one done, the conversations take new
// turns, and a cancel sent during the outage is honoured.
func TestStoreOutageEveryTurnEndsOnce(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: chatter(), tweak: func(c *coordinator.Config) {
		c.EndRetryBackoff, c.MaxEndRetryBackoff = time.Millisecond, 20*time.Millisecond
	}})
	type turn struct{ conv, rid string }
	var turns []turn
	for range 4 {
		conv := e.conversation()
		acc := e.submit(conv, "talk")
		turns = append(turns, turn{conv, acc.RequestID})
	}
	// Let them stream a little, then fail every write.
	for _, tr := range turns {
		e.waitFor(tr.conv, "some text", func(fs []protocol.Frame) bool { return len(fs) >= 3 })
	}
	e.store.FailWrites.Store(true)
	testutil.Eventually(t, func() bool { return e.store.Faults.Load() >= 8 }, "8 failed writes")
	// A cancel during the outage is accepted and honoured once it clears.
	_, cerr := e.coord.CancelTurn(e.ctx(), turns[0].conv, turns[0].rid)
	e.store.FailWrites.Store(false)
	if cerr != nil && !protocol.IsCode(cerr, protocol.ServiceFailure) {
		t.Fatalf("cancel during the outage: %v", cerr)
	}
	for _, tr := range turns {
		frames := e.waitDone(tr.conv, tr.rid)
		if n := countDone(frames, tr.rid); n != 1 {
			t.Fatalf("%d done frames: %v", n, kinds(frames))
		}
		for i, f := range e.frames(tr.conv) {
			if f.Sequence != int64(i+1) {
				t.Fatalf("sequence %d at %d", f.Sequence, i)
			}
		}
		e.waitTurn(tr.rid, func(t store.Turn) bool { return t.Status.Terminal() })
		next := e.submit(tr.conv, "again")
		e.waitDone(tr.conv, next.RequestID)
	}
}
