package storetest

import (
	"sync"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testTurnOwner(t *testing.T, f *fixture) {
	a, b := newID(), newID()
	tr := f.queuedOn(a)
	if tr.Owner != a {
		t.Fatalf("queued turn owner = %q, want its submitter", tr.Owner)
	}
	tr, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick(), Instance: b})
	if err != nil || tr.Owner != b {
		t.Fatalf("StartTurn = %+v, %v; want owner %s", tr, err, b)
	}
	// An instance never ends a turn another one owns.
	before := len(f.frames(tr.ConversationID))
	_, _, err = f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: store.TurnFailed, Now: f.tick(), Instance: a})
	wantCode(t, err, protocol.Conflict)
	if got := len(f.frames(tr.ConversationID)); got != before || f.turn(tr.RequestID).Status != store.TurnRunning {
		t.Fatal("a refused FinishTurn changed the turn")
	}
	done, _, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: store.TurnCompleted, Now: f.tick(), Instance: b})
	if err != nil || done.Owner != "" || done.Status != store.TurnCompleted {
		t.Fatalf("FinishTurn by its owner = %+v, %v", done, err)
	}
}

func testClaimTurn(t *testing.T, f *fixture) {
	a, b := newID(), newID()
	if _, ok, err := f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: b, Now: f.tick()}); ok || err != nil {
		t.Fatalf("ClaimTurn with nothing queued = %v, %v", ok, err)
	}
	first := f.queuedOn(a)
	second := f.queuedOn(a)
	f.runningOn(a)
	// Its own queued turns are the submitter's to start.
	if _, ok, err := f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: a, Now: f.tick()}); ok || err != nil {
		t.Fatalf("ClaimTurn of its own queued turns = %v, %v", ok, err)
	}
	sig := f.s.ControlSignal(store.TurnKey(first.RequestID))
	got, ok, err := f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: b, Now: f.tick()})
	if err != nil || !ok || got.RequestID != first.RequestID || got.Status != store.TurnRunning || got.Owner != b || got.StartedAt == nil {
		t.Fatalf("ClaimTurn = %+v, %v, %v; want the oldest queued turn, running, owned by the claimer", got, ok, err)
	}
	waitClosed(t, sig, "a claim notifies the turn's control key")
	// The submitter's own start now fails: the claimer runs it.
	_, err = f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: first.RequestID, Now: f.tick(), Instance: a})
	wantCode(t, err, protocol.Conflict)
	got, ok, _ = f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: b, Now: f.tick()})
	if !ok || got.RequestID != second.RequestID {
		t.Fatalf("second claim = %+v, %v", got, ok)
	}
	if _, ok, _ := f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: b, Now: f.tick()}); ok {
		t.Fatal("claimed a running turn")
	}
}

// testClaimTurnConcurrent: claimers racing over queued turns each get a
// different one, and every turn is claimed once.
func testClaimTurnConcurrent(t *testing.T, f *fixture) {
	submitter := newID()
	want := map[string]bool{}
	for range 6 {
		want[f.queuedOn(submitter).RequestID] = true
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		claimer := newID()
		wg.Go(func() {
			for {
				tr, ok, err := f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: claimer, Now: f.clock.Now()})
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				if tr.Owner != claimer {
					t.Errorf("claimed turn owner = %q, want %q", tr.Owner, claimer)
				}
				mu.Lock()
				claimed[tr.RequestID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for id := range want {
		if claimed[id] != 1 {
			t.Fatalf("turn %s claimed %d times", id, claimed[id])
		}
	}
}

func testReleaseTurn(t *testing.T, f *fixture) {
	a, b := newID(), newID()
	tr := f.queuedOn(a)
	_, err := f.s.ReleaseTurn(f.ctx, store.ReleaseTurnParams{RequestID: tr.RequestID, From: b})
	wantCode(t, err, protocol.Conflict)
	sig := f.s.ControlSignal(store.TurnsQueued)
	got, err := f.s.ReleaseTurn(f.ctx, store.ReleaseTurnParams{RequestID: tr.RequestID, From: a})
	if err != nil || got.Owner != "" || got.Status != store.TurnQueued {
		t.Fatalf("ReleaseTurn = %+v, %v", got, err)
	}
	waitClosed(t, sig, "a released turn is announced")
	// Now even its submitter may claim it.
	got, ok, err := f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: a, Now: f.tick()})
	if err != nil || !ok || got.RequestID != tr.RequestID {
		t.Fatalf("ClaimTurn of a released turn = %+v, %v, %v", got, ok, err)
	}
	_, err = f.s.ReleaseTurn(f.ctx, store.ReleaseTurnParams{RequestID: tr.RequestID, From: a})
	wantCode(t, err, protocol.Conflict)
}

// testParkedTurnOwner: a turn parked on a human is no one's; the confirmer
// owns it (and the proposal) while the command executes; whoever records
// the outcome continues it.
func testParkedTurnOwner(t *testing.T, f *fixture) {
	a, b, c := newID(), newID(), newID()
	conv, tr := f.runningOn(a)
	p := f.propose(conv.ID, tr.RequestID)
	f.park(tr.RequestID, true)
	if got := f.turn(tr.RequestID); got.Owner != "" || got.Status != store.TurnAwaitingConfirmation {
		t.Fatalf("parked turn = %s owned by %q, want no owner", got.Status, got.Owner)
	}
	now := f.tick()
	p, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Now: now, Instance: b,
		Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, now), Frames: []store.NewFrame{confirmation(p.ID, protocol.ConfirmationConfirmed)}})
	if err != nil || p.Owner != b {
		t.Fatalf("ConfirmProposal = %+v, %v; want owner %s", p, err, b)
	}
	if got := f.turn(tr.RequestID); got.Owner != b || got.Status != store.TurnAwaitingConfirmation {
		t.Fatalf("turn while its proposal executes = %s owned by %q, want %s", got.Status, got.Owner, b)
	}
	now = f.tick()
	_, resumed, err := f.s.FinishProposal(f.ctx, store.FinishProposalParams{ID: p.ID, Status: store.ProposalSucceeded, Now: now, Instance: c,
		Audit: proposalAudit(p.ID, protocol.DecisionExecuted, now)})
	if err != nil || !resumed {
		t.Fatalf("FinishProposal = %v, %v", resumed, err)
	}
	if got := f.turn(tr.RequestID); got.Owner != c || got.Status != store.TurnRunning {
		t.Fatalf("resumed turn = %s owned by %q, want running, %s's", got.Status, got.Owner, c)
	}

	// Parking while a proposal executes elsewhere: the executor owns it.
	conv2, tr2 := f.runningOn(a)
	p2 := f.propose(conv2.ID, tr2.RequestID)
	now = f.tick()
	if _, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p2.ID, Now: now, Instance: b,
		Audit: proposalAudit(p2.ID, protocol.DecisionConfirmed, now)}); err != nil {
		t.Fatal(err)
	}
	if got := f.turn(tr2.RequestID); got.Owner != a {
		t.Fatalf("a running turn changed owner to %q when another instance confirmed its proposal", got.Owner)
	}
	f.park(tr2.RequestID, true)
	if got := f.turn(tr2.RequestID); got.Owner != b {
		t.Fatalf("turn parked on a proposal executing on %s is owned by %q", b, got.Owner)
	}
}
