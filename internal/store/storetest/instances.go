package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseInstances checks instances, leases, the ownership of work and
// the control notifications (store.InstanceStore).
func ExerciseInstances(t *testing.T, open func(t *testing.T) store.Store) {
	run := subtests(t, open)
	run("RegisterRenewStop", testInstanceLifecycle)
	run("ReapExpired", testInstanceReap)
	run("RenewRacesReap", testInstanceRenewRacesReap)
	run("Purge", testInstancePurge)
	run("TurnOwner", testTurnOwner)
	run("ClaimTurn", testClaimTurn)
	run("ClaimTurnConcurrent", testClaimTurnConcurrent)
	run("ReleaseTurn", testReleaseTurn)
	run("ParkedTurnOwner", testParkedTurnOwner)
	run("OrphanedTurns", testOrphanedTurns)
	run("AdoptTurnOnce", testAdoptTurnOnce)
	run("OrphanedProposal", testOrphanedProposal)
	run("OrphanedRuns", testOrphanedRuns)
	run("ActiveWork", testActiveWork)
	run("ControlSignals", testControlSignals)
}

// instance registers an instance whose lease runs for lease from now.
func (f *fixture) instance(lease time.Duration) store.Instance {
	f.t.Helper()
	now := f.tick()
	in, err := f.s.RegisterInstance(f.ctx, store.RegisterInstanceParams{Instance: store.Instance{
		ID: newID(), Address: "http://127.0.0.1:8765", PID: 4242, Version: "test",
		StartedAt: now, HeartbeatAt: now, LeaseExpiresAt: now.Add(lease)}})
	if err != nil {
		f.t.Fatalf("RegisterInstance: %v", err)
	}
	return in
}

func (f *fixture) instanceByID(id string) store.Instance {
	f.t.Helper()
	all, err := f.s.ListInstances(f.ctx, store.ListInstancesParams{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, in := range all {
		if in.ID == id {
			return in
		}
	}
	f.t.Fatalf("instance %s is not listed", id)
	return store.Instance{}
}

// reap reaps the instances whose lease expired by now, except except.
func (f *fixture) reap(except string) []string {
	f.t.Helper()
	got, err := f.s.ReapInstances(f.ctx, store.ReapInstancesParams{Now: f.clock.Now(), Except: except})
	if err != nil {
		f.t.Fatalf("ReapInstances: %v", err)
	}
	ids := make([]string, len(got))
	for i, in := range got {
		ids[i] = in.ID
	}
	slices.Sort(ids)
	return ids
}

// runningOn returns a new conversation with a turn running on instance.
func (f *fixture) runningOn(instance string) (store.Conversation, store.Turn) {
	f.t.Helper()
	tr := f.queuedOn(instance)
	tr, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick(), Instance: instance})
	if err != nil {
		f.t.Fatal(err)
	}
	return f.get(tr.ConversationID), tr
}

// queuedOn submits a turn owned (queued) by instance.
func (f *fixture) queuedOn(instance string) store.Turn {
	f.t.Helper()
	c := f.conversation()
	p := f.submitParams(c.ID, 0)
	p.Instance = instance
	tr, _, err := f.s.SubmitTurn(f.ctx, p)
	if err != nil {
		f.t.Fatal(err)
	}
	return tr
}

func testInstanceLifecycle(t *testing.T, f *fixture) {
	in := f.instance(10 * time.Second)
	if in.State(f.clock.Now()) != store.InstanceLive || in.PID != 4242 || in.Address == "" || in.Version != "test" {
		t.Fatalf("registered %+v, state %s", in, in.State(f.clock.Now()))
	}
	now := f.clock.Advance(9 * time.Second)
	renewed, err := f.s.RenewLease(f.ctx, store.RenewLeaseParams{ID: in.ID, Now: now, ExpiresAt: now.Add(10 * time.Second)})
	if err != nil || !renewed.HeartbeatAt.Equal(now) || !renewed.LeaseExpiresAt.Equal(now.Add(10*time.Second)) {
		t.Fatalf("RenewLease = %+v, %v", renewed, err)
	}
	if st := renewed.State(now.Add(5 * time.Second)); st != store.InstanceLive {
		t.Fatalf("after renewal the instance is %s", st)
	}
	if st := renewed.State(now.Add(11 * time.Second)); st != store.InstanceExpired {
		t.Fatalf("past its lease the instance is %s", st)
	}
	if err := f.s.StopInstance(f.ctx, store.StopInstanceParams{ID: in.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	if st := f.instanceByID(in.ID).State(f.clock.Now()); st != store.InstanceStopped {
		t.Fatalf("stopped instance is %s", st)
	}
	_, err = f.s.RenewLease(f.ctx, store.RenewLeaseParams{ID: in.ID, Now: f.tick(), ExpiresAt: f.clock.Now().Add(time.Minute)})
	wantCode(t, err, protocol.Conflict)
	_, err = f.s.RenewLease(f.ctx, store.RenewLeaseParams{ID: newID(), Now: f.tick(), ExpiresAt: f.clock.Now().Add(time.Minute)})
	wantCode(t, err, protocol.Conflict)
	_, err = f.s.RegisterInstance(f.ctx, store.RegisterInstanceParams{Instance: store.Instance{}})
	wantCode(t, err, protocol.Validation)
}

func testInstanceReap(t *testing.T, f *fixture) {
	short := f.instance(2 * time.Second)
	long := f.instance(time.Hour)
	self := f.instance(2 * time.Second) // expired too, but never reaped by itself
	if got := f.reap(self.ID); len(got) != 0 {
		t.Fatalf("reaped %v while every lease runs", got)
	}
	f.clock.Advance(5 * time.Second)
	if got := f.reap(self.ID); !slices.Equal(got, []string{short.ID}) {
		t.Fatalf("reaped %v, want only %s", got, short.ID)
	}
	if st := f.instanceByID(short.ID).State(f.clock.Now()); st != store.InstanceReaped {
		t.Fatalf("reaped instance is %s", st)
	}
	if got := f.reap(self.ID); len(got) != 0 {
		t.Fatalf("reaped %v again", got)
	}
	// A reaped instance lost its lease for good.
	_, err := f.s.RenewLease(f.ctx, store.RenewLeaseParams{ID: short.ID, Now: f.tick(), ExpiresAt: f.clock.Now().Add(time.Hour)})
	pe := wantCode(t, err, protocol.Conflict)
	if pe.Details["instance"] != short.ID {
		t.Fatalf("lease lost details = %v", pe.Details)
	}
	// All: a daemon alone with the database reaps every other instance.
	got, err := f.s.ReapInstances(f.ctx, store.ReapInstancesParams{Now: f.tick(), Except: self.ID, All: true})
	if err != nil || len(got) != 1 || got[0].ID != long.ID {
		t.Fatalf("ReapInstances(All) = %+v, %v", got, err)
	}
	if st := f.instanceByID(self.ID).State(f.clock.Now()); st != store.InstanceExpired {
		t.Fatalf("the reaper's own instance is %s", st)
	}
}

// testInstanceRenewRacesReap: a renewal and a reaping of one expired
// instance never both succeed.
func testInstanceRenewRacesReap(t *testing.T, f *fixture) {
	for range 10 {
		in := f.instance(time.Second)
		now := f.clock.Advance(2 * time.Second)
		var renewErr error
		var reaped []store.Instance
		var reapErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			_, renewErr = f.s.RenewLease(f.ctx, store.RenewLeaseParams{ID: in.ID, Now: now, ExpiresAt: now.Add(time.Minute)})
		})
		wg.Go(func() {
			reaped, reapErr = f.s.ReapInstances(f.ctx, store.ReapInstancesParams{Now: now, Except: "nobody"})
		})
		wg.Wait()
		if reapErr != nil {
			t.Fatal(reapErr)
		}
		won := slices.ContainsFunc(reaped, func(r store.Instance) bool { return r.ID == in.ID })
		switch {
		case renewErr == nil && won:
			t.Fatal("the lease was renewed and reaped")
		case renewErr != nil && !won:
			t.Fatalf("neither renewed (%v) nor reaped", renewErr)
		case renewErr != nil:
			wantCode(t, renewErr, protocol.Conflict)
		}
	}
}

func testInstancePurge(t *testing.T, f *fixture) {
	gone := f.instance(time.Second)
	busy := f.instance(time.Second)
	f.runningOn(busy.ID)
	live := f.instance(time.Hour)
	f.clock.Advance(2 * time.Second)
	f.reap(live.ID)
	n, err := f.s.PurgeInstances(f.ctx, store.PurgeInstancesParams{Before: f.clock.Now().Add(time.Second)})
	if err != nil || n != 1 {
		t.Fatalf("PurgeInstances = %d, %v; want the one that owns nothing", n, err)
	}
	all, _ := f.s.ListInstances(f.ctx, store.ListInstancesParams{})
	for _, in := range all {
		if in.ID == gone.ID {
			t.Fatal("the purged instance is still listed")
		}
	}
	if len(all) != 2 {
		t.Fatalf("%d instances left, want the busy and the live one", len(all))
	}
}

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
	var wg sync.WaitGroup
	for i := range reapers {
		wg.Go(func() {
			_, errs[i] = f.s.AdoptTurn(f.ctx, store.AdoptTurnParams{RequestID: tr.RequestID, From: dead.ID, To: newID(),
				Indeterminate: []store.IndeterminateAudit{{ProposalID: p.ID, Audit: proposalAudit(p.ID, protocol.DecisionIndeterminate, now)}}})
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
	if got := len(f.audits(p.ID)) - before; got != 1 {
		t.Fatalf("%d indeterminate audit rows, want 1", got)
	}
	if got := f.proposal(p.ID); got.Status != store.ProposalExecuting || got.Owner != "" {
		t.Fatalf("proposal after adoption = %s owned by %q, want executing with no owner (indeterminate)", got.Status, got.Owner)
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
	got, err := f.s.DisownProposal(f.ctx, store.DisownProposalParams{ID: p.ID, From: dead.ID, Audit: audit})
	if err != nil || got.Owner != "" || got.Status != store.ProposalExecuting {
		t.Fatalf("DisownProposal = %+v, %v", got, err)
	}
	wantAudit(t, f.audits(p.ID)[0], audit)
	_, err = f.s.DisownProposal(f.ctx, store.DisownProposalParams{ID: p.ID, From: dead.ID, Audit: audit})
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

// testControlSignals: the commits that ask an owner for attention wake its
// control key (in this process; PostgreSQL's own tests check across
// processes).
func testControlSignals(t *testing.T, f *fixture) {
	_, tr := f.running()
	sig := f.s.ControlSignal(store.TurnKey(tr.RequestID))
	other := f.s.ControlSignal(store.TurnKey(newID()))
	if _, _, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: tr.RequestID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig, "a cancel request wakes the turn's key")
	if isClosed(other) {
		t.Fatal("a cancel woke another turn's key")
	}
	runs := f.s.ControlSignal(store.RunsQueued)
	pb := f.playbook("audit")
	f.queueRun(pb, store.TriggerManual)
	waitClosed(t, runs, "a queued run wakes RunsQueued")
	r := f.claim()
	sig = f.s.ControlSignal(store.RunKey(r.ID))
	if _, err := f.s.CancelRun(f.ctx, store.CancelRunParams{ID: r.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig, "a run's cancel wakes its key")
	sig = f.s.ControlSignal(store.TurnsQueued)
	if err := f.s.Announce(f.ctx, store.TurnsQueued); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig, "Announce wakes its key")
}
