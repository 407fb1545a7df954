package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testOrphanedTurns(t *testing.T, f *fixture) {
	dead := f.instance(time.Second)
	live := f.instance(time.Hour)
	_, running := f.runningOn(dead.ID)
	queued := f.queuedOn(dead.ID)
	_, mine := f.runningOn(live.ID)
	conv, parkedTr := f.runningOn(dead.ID)
	f.propose(conv.ID, parkedTr.RequestID)
	f.park(parkedTr.RequestID, true) // parked on a human: no one's
	w, err := f.s.OrphanedWork(f.ctx, store.OrphanedWorkParams{})
	if err != nil || len(w.Turns)+len(w.Proposals)+len(w.Runs) != 0 {
		t.Fatalf("orphaned work before any reaping = %+v, %v", w, err)
	}
	f.clock.Advance(2 * time.Second)
	f.reap(live.ID)
	w, err = f.s.OrphanedWork(f.ctx, store.OrphanedWorkParams{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tr := range w.Turns {
		ids = append(ids, tr.RequestID)
		if tr.Owner != dead.ID {
			t.Fatalf("orphaned turn owner = %q", tr.Owner)
		}
	}
	if !slices.Equal(ids, []string{running.RequestID, queued.RequestID}) {
		t.Fatalf("orphaned turns %v, want the dead instance's running and queued ones, not %s's or the parked one", ids, mine.RequestID)
	}
	adopted, err := f.s.AdoptTurn(f.ctx, store.AdoptTurnParams{RequestID: running.RequestID, From: dead.ID, To: live.ID})
	if err != nil || adopted.Owner != live.ID || adopted.Status != store.TurnRunning {
		t.Fatalf("AdoptTurn = %+v, %v", adopted, err)
	}
	f.finish(running.RequestID, store.TurnFailed, protocol.Errorf(protocol.ServiceRestarted, "gone"))
	if _, err := f.s.ReleaseTurn(f.ctx, store.ReleaseTurnParams{RequestID: queued.RequestID, From: dead.ID}); err != nil {
		t.Fatal(err)
	}
	w, _ = f.s.OrphanedWork(f.ctx, store.OrphanedWorkParams{})
	if len(w.Turns) != 0 {
		t.Fatalf("orphaned turns after adoption and release: %+v", w.Turns)
	}
}

// testAdoptTurnOnce: reapers racing for one turn: one adopts it, and the
// indeterminate audit row of its executing proposal is written once.
func testAdoptTurnOnce(t *testing.T, f *fixture) {
	dead := f.instance(time.Second)
	conv, tr := f.runningOn(dead.ID)
	p := f.propose(conv.ID, tr.RequestID)
	f.park(tr.RequestID, true)
	now := f.tick()
	if _, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Now: now, Instance: dead.ID,
		Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, now)}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Second)
	f.reap("")
	w, _ := f.s.OrphanedWork(f.ctx, store.OrphanedWorkParams{})
	if len(w.Turns) != 1 || w.Turns[0].Status != store.TurnAwaitingConfirmation || len(w.Proposals) != 0 {
		t.Fatalf("orphaned work = %+v, want the turn awaiting its executing proposal (and not the proposal twice)", w)
	}
	before := len(f.audits(p.ID))
	const reapers = 4
	errs := make([]error, reapers)
	reaperIDs := make([]string, reapers)
	for i := range reaperIDs {
		reaperIDs[i] = newID()
	}
	var wg sync.WaitGroup
	for i := range reapers {
		wg.Go(func() {
			_, errs[i] = f.s.AdoptTurn(f.ctx, store.AdoptTurnParams{RequestID: tr.RequestID, From: dead.ID, To: reaperIDs[i],
				Proposals: []string{p.ID}})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			wantCode(t, err, protocol.Conflict)
		}
	}
	if won != 1 {
		t.Fatalf("%d reapers adopted the turn: %v", won, errs)
	}
	if got := len(f.audits(p.ID)) - before; got != 0 {
		t.Fatalf("%d audit rows written by the takeover, want none (its new owner records the outcome)", got)
	}
	winner := f.turn(tr.RequestID).Owner
	if got := f.proposal(p.ID); got.Status != store.ProposalExecuting || got.Owner != winner || !slices.Contains(reaperIDs, winner) {
		t.Fatalf("proposal after adoption = %s owned by %q, want executing, owned by the adopter %q", got.Status, got.Owner, winner)
	}
}

// testOrphanedProposal: a proposal left executing by a dead instance whose
// turn ended meanwhile is disowned once with its audit row.
func testOrphanedProposal(t *testing.T, f *fixture) {
	dead := f.instance(time.Second)
	live := f.instance(time.Hour)
	conv, tr := f.runningOn(live.ID)
	p := f.propose(conv.ID, tr.RequestID)
	now := f.tick()
	if _, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Now: now, Instance: dead.ID,
		Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, now)}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Second)
	f.reap(live.ID)
	w, _ := f.s.OrphanedWork(f.ctx, store.OrphanedWorkParams{})
	if len(w.Turns) != 0 || len(w.Proposals) != 1 || w.Proposals[0].ID != p.ID {
		t.Fatalf("orphaned work = %+v, want the proposal alone (its turn runs on a live instance)", w)
	}
	audit := proposalAudit(p.ID, protocol.DecisionIndeterminate, f.tick())
	got, err := f.s.DisownProposal(f.ctx, store.DisownProposalParams{ID: p.ID, From: dead.ID, Audit: &audit})
	if err != nil || got.Owner != "" || got.Status != store.ProposalExecuting {
		t.Fatalf("DisownProposal = %+v, %v", got, err)
	}
	wantAudit(t, f.audits(p.ID)[0], audit)
	_, err = f.s.DisownProposal(f.ctx, store.DisownProposalParams{ID: p.ID, From: dead.ID, Audit: &audit})
	wantCode(t, err, protocol.Conflict)
	if w, _ := f.s.OrphanedWork(f.ctx, store.OrphanedWorkParams{}); len(w.Proposals) != 0 {
		t.Fatalf("a disowned proposal is still orphaned: %+v", w.Proposals)
	}
}

func testOrphanedRuns(t *testing.T, f *fixture) {
	dead := f.instance(time.Second)
	live := f.instance(time.Hour)
	pb := f.playbook("audit")
	f.queueRun(pb, store.TriggerManual)
	r, ok, err := f.s.ClaimRun(f.ctx, store.ClaimRunParams{Now: f.tick(), Instance: dead.ID})
	if err != nil || !ok || r.Owner != dead.ID {
		t.Fatalf("ClaimRun = %+v, %v, %v", r, ok, err)
	}
	queued := f.queueRun(pb, store.TriggerManual)
	// Only its owner finishes a run.
	_, err = f.s.FinishRun(f.ctx, store.FinishRunParams{ID: r.ID, Status: store.RunSucceeded, Now: f.tick(), Instance: live.ID})
	wantCode(t, err, protocol.Conflict)
	f.clock.Advance(2 * time.Second)
	f.reap(live.ID)
	w, _ := f.s.OrphanedWork(f.ctx, store.OrphanedWorkParams{})
	if len(w.Runs) != 1 || w.Runs[0].ID != r.ID {
		t.Fatalf("orphaned runs = %v, want the dead instance's running run only (not the queued %s)", runIDs(w.Runs), queued.ID)
	}
	sig := f.s.ControlSignal(store.RunKey(r.ID))
	got, err := f.s.ReapRun(f.ctx, store.ReapRunParams{ID: r.ID, From: dead.ID, ErrorCode: "service_restarted", ErrorMessage: "its daemon died", Now: f.tick()})
	if err != nil || got.Status != store.RunFailed || got.ErrorCode == nil || *got.ErrorCode != "service_restarted" ||
		got.ErrorMessage == nil || *got.ErrorMessage != "its daemon died" || got.Owner != "" || got.Version != r.Version+1 {
		t.Fatalf("ReapRun = %+v, %v", got, err)
	}
	waitClosed(t, sig, "a reaped run notifies its key")
	_, err = f.s.ReapRun(f.ctx, store.ReapRunParams{ID: r.ID, From: dead.ID, ErrorCode: "x", ErrorMessage: "x", Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	// The dead owner's late finish is refused.
	_, err = f.s.FinishRun(f.ctx, store.FinishRunParams{ID: r.ID, Status: store.RunSucceeded, Now: f.tick(), Instance: dead.ID})
	wantCode(t, err, protocol.Conflict)
}

func testActiveWork(t *testing.T, f *fixture) {
	a := newID()
	_, running := f.runningOn(a)
	queued := f.queuedOn(a)
	done := f.queuedOn(a)
	if _, _, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: done.RequestID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	pb := f.playbook("audit")
	f.queueRun(pb, store.TriggerManual)
	r, _, _ := f.s.ClaimRun(f.ctx, store.ClaimRunParams{Now: f.tick(), Instance: a})
	w, err := f.s.ActiveWork(f.ctx, store.ActiveWorkParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Turns) != 2 || w.Turns[0].RequestID != running.RequestID || w.Turns[1].RequestID != queued.RequestID ||
		w.Turns[0].Owner != a || len(w.Runs) != 1 || w.Runs[0].ID != r.ID || w.Runs[0].Owner != a {
		t.Fatalf("ActiveWork = %+v", w)
	}
}
