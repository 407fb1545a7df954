package coordinator_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/coordinator/coordtest"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/testutil"
)

// Self-fencing (lifecycle.go): a daemon that cannot prove its lease
// decides, claims and executes nothing until it renews.

// lease is a lease the test holds or lets lapse; looks counts the
// questions asked of it.
type lease struct {
	lapsed atomic.Bool
	looks  atomic.Int64
}

func (l *lease) Held(time.Time) error {
	l.looks.Add(1)
	if l.lapsed.Load() {
		return errors.New("renewals failed for longer than the expiry")
	}
	return nil
}

// wantLeaseUnproven checks a decision refused for an unproven lease: 503
// service_failure, retryable with a hint, reason lease_unproven.
func wantLeaseUnproven(t *testing.T, what string, err error) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.ServiceFailure || !pe.Retryable || pe.RetryAfterMs <= 0 || pe.Details["reason"] != "lease_unproven" {
		t.Fatalf("%s: %v (%+v), want service_failure, lease_unproven, with a retry hint", what, err, pe)
	}
}

// TestSharedSelfFencingDecidesNothing: while its lease is unproven a
// daemon refuses confirms and denials at once (retry elsewhere) and the
// proposal stays pending; once renewed, the confirm goes through.
func TestSharedSelfFencingDecidesNothing(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 2, 20*time.Millisecond)
	l := &lease{}
	e.coord.UseLease(l)
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	l.lapsed.Store(true)
	_, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	wantLeaseUnproven(t, "confirm", err)
	_, err = e.coord.Deny(e.ctx(), conv, prop.ID)
	wantLeaseUnproven(t, "deny", err)
	if p := e.proposal(prop.ID); p.Status != store.ProposalPending || len(e.decisions(prop.ID)) != 0 || e.schedule().Enabled {
		t.Fatalf("proposal %s with decisions %v after refused decisions, schedule enabled %v", p.Status, e.decisions(prop.ID), e.schedule().Enabled)
	}
	l.lapsed.Store(false)
	res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm once renewed = %+v, %v", res, err)
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
}

// TestSharedSelfFencingClaimsNothing: a daemon whose lease is unproven
// claims no queued turn of another daemon, however often it looks; once
// renewed it claims it.
func TestSharedSelfFencingClaimsNothing(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 1, 20*time.Millisecond)
	busy, queuedConv, queued := e.busyAndQueued()
	l := &lease{}
	l.lapsed.Store(true)
	// b, its lease unproven from its start.
	cfg := e.cfg
	cfg.Instance, cfg.Workers, cfg.ClaimInterval = "b", 1, 5*time.Millisecond
	e.register(cfg)
	b := coordinator.New(cfg)
	b.UseLease(l)
	if err := b.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	testutil.Eventually(t, func() bool { return l.looks.Load() >= 20 }, "b to look for work many times")
	if got := e.waitTurn(queued.RequestID, func(store.Turn) bool { return true }); got.Status != store.TurnQueued || got.Owner != "a" {
		t.Fatalf("the queued turn is %s owned by %q while b's lease is unproven", got.Status, got.Owner)
	}
	l.lapsed.Store(false)
	// The claimed turn is short: its end clears its owner, so it is seen
	// ending while a's one worker still holds the busy turn: only b can
	// have run it.
	if k := kinds(e.waitDone(queuedConv, queued.RequestID)); k[len(k)-1] != "done:completed" {
		t.Fatalf("claimed turn: %v", k)
	}
	if got := e.waitTurn(busy.RequestID, func(store.Turn) bool { return true }); got.Status != store.TurnRunning || got.Owner != "a" {
		t.Fatalf("a's busy turn = %s owned by %q: a's worker was free to run the queued turn itself", got.Status, got.Owner)
	}
}

// TestSharedSelfFencingExecutesNothing: the lease lapses after a confirm
// and before its command runs. The command does not run while the lease
// is unproven (its transaction checks the lease), the confirm is answered
// at once (executing, lease_unproven: the client may look elsewhere), and
// once the lease is renewed the command runs, once, and the turn ends.
func TestSharedSelfFencingExecutesNothing(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 2, 20*time.Millisecond)
	l := &lease{}
	e.coord.UseLease(l)
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	paused := e.store.Arm("Execute", nil)
	answered := make(chan protocol.ProposalResult, 1)
	go func() {
		res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
		if err != nil {
			t.Error(err)
		}
		answered <- res
	}()
	select {
	case <-paused.Reached():
	case <-time.After(testutil.Patience):
		t.Fatal("the confirmed command never started")
	}
	l.lapsed.Store(true)
	paused.Release()
	var res protocol.ProposalResult
	select {
	case res = <-answered:
	case <-time.After(testutil.Patience):
		t.Fatal("the confirm was not answered while the lease was unproven")
	}
	if res.Status != protocol.ResultExecuting || res.Error == nil || res.Error.Details["reason"] != "lease_unproven" {
		t.Fatalf("confirm while the lease is unproven = %+v, want executing, lease_unproven", res)
	}
	testutil.Eventually(t, func() bool { return l.looks.Load() >= 10 }, "the execution to try again on the unproven lease")
	if p := e.proposal(prop.ID); p.ExecutedAt != nil || e.schedule().Enabled {
		t.Fatalf("the command ran on an unproven lease (executed at %v)", p.ExecutedAt)
	}
	l.lapsed.Store(false)
	e.checkOneEnding(conv, acc.RequestID, prop)
	if p := e.proposal(prop.ID); p.Status != store.ProposalSucceeded || !e.schedule().Enabled {
		t.Fatalf("after the renewal: proposal %s, schedule enabled %v", p.Status, e.schedule().Enabled)
	}
}

// TestConfirmThatCannotReachTheTurnIsNotAConflict: a confirm whose
// delivery to the turn's owner fails (the database does not answer the
// read of the turn) says so, and nothing was decided: it is not answered
// conflict "still pending", and a later confirm succeeds.
func TestConfirmThatCannotReachTheTurnIsNotAConflict(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 2, 20*time.Millisecond)
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	// Another daemon takes the decision: it reads the turn to adopt it.
	b := e.peer("b", 1)
	e.store.Fail("GetTurn", true)
	_, err := b.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	e.store.Fail("GetTurn", false)
	if err == nil || protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("confirm that could not reach the turn = %v, want an error that is not conflict", err)
	}
	if p := e.proposal(prop.ID); p.Status != store.ProposalPending {
		t.Fatalf("proposal %s after the failed confirm", p.Status)
	}
	res, err := b.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("the confirm again = %+v, %v", res, err)
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
}

// TestSharedOwnerCallsKeepTheCallDeadline: an owner whose database
// connections hang makes no call longer than one call's deadline — not
// the read of its parked turn, not the recheck another daemon's notice
// asks for while a confirm waits on it (its confirmation retried through
// an outage) — so the confirm is answered once the lease lapses, within
// the lease expiry and one call, however the calls interleave.
func TestSharedOwnerCallsKeepTheCallDeadline(t *testing.T) {
	t.Parallel()
	const callTimeout = 2 * time.Second
	e := newEngine(t, engineOpts{script: &toggleScript, workers: 2, tweak: func(c *coordinator.Config) {
		c.Shared, c.Instance, c.ClaimInterval, c.CallTimeout = true, "a", 20*time.Millisecond, callTimeout
	}})
	l := &lease{}
	e.coord.UseLease(l)
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	key := store.TurnKey(acc.RequestID)
	wantBounded := func(what string, hung <-chan coordtest.Hung) {
		t.Helper()
		select {
		case h := <-hung:
			if h.Left <= 0 || h.Left > callTimeout {
				t.Fatalf("%s: %s waited with %v left (0: no deadline), want one call's deadline, %v", what, h.Method, h.Left, callTimeout)
			}
		case <-time.After(testutil.Patience):
			t.Fatalf("%s: the turn was never read", what)
		}
	}

	// Parked, no decision: another daemon's notice makes the owner read
	// its turn.
	hung := e.store.Hang("GetTurn")
	if err := e.db.Announce(e.ctx(), key); err != nil {
		t.Fatal(err)
	}
	wantBounded("the parked owner's read of its turn", hung)
	e.store.Unhang("GetTurn")

	// A confirm whose confirmation the database refuses for now: the
	// owner retries it, and meanwhile takes a notice in.
	faults := e.store.Faults.Load()
	e.store.Outage.Store(true)
	answered := make(chan error, 1)
	go func() {
		_, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
		answered <- err
	}()
	testutil.Eventually(t, func() bool { return e.store.Faults.Load() > faults }, "the confirmation to meet the outage")
	hung = e.store.Hang("GetTurn")
	if err := e.db.Announce(e.ctx(), key); err != nil {
		t.Fatal(err)
	}
	wantBounded("the recheck while a confirm waits", hung)
	l.lapsed.Store(true)
	select {
	case err := <-answered:
		wantLeaseUnproven(t, "the confirm waiting on the owner once the lease lapsed", err)
	case <-time.After(testutil.Patience):
		t.Fatal("the confirm was not answered once the lease lapsed")
	}
	e.store.Unhang("GetTurn")
	e.store.Outage.Store(false)
	l.lapsed.Store(false)
	if p := e.proposal(prop.ID); p.Status != store.ProposalPending {
		t.Fatalf("proposal %s after the refused confirm, want pending", p.Status)
	}
	res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm once renewed = %+v, %v", res, err)
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
}
