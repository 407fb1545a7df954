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
	run("RegisterAgain", testInstanceRegisterAgain)
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

// testInstanceRegisterAgain: a registration tried again (its first
// commit's answer lost in an outage) finds its own instance, unchanged.
func testInstanceRegisterAgain(t *testing.T, f *fixture) {
	in := f.instance(time.Minute)
	again := in
	again.Address, again.LeaseExpiresAt = "http://127.0.0.1:9999", in.LeaseExpiresAt.Add(time.Hour)
	got, err := f.s.RegisterInstance(f.ctx, store.RegisterInstanceParams{Instance: again})
	if err != nil {
		t.Fatalf("registering instance %s again: %v", in.ID, err)
	}
	if got.Address != in.Address || !got.LeaseExpiresAt.Equal(in.LeaseExpiresAt) {
		t.Fatalf("registered again, the instance is %+v, want the first registration %+v", got, in)
	}
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
// instance race without waiting for each other; the reaping wins: once it
// committed, the instance's renewals fail and its fenced writes are
// refused, whatever the renewal that raced it answered.
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
		case renewErr != nil && !won:
			t.Fatalf("neither renewed (%v) nor reaped", renewErr)
		case renewErr != nil:
			wantCode(t, renewErr, protocol.Conflict)
		}
		if !won {
			continue
		}
		later := f.tick()
		_, err := f.s.RenewLease(f.ctx, store.RenewLeaseParams{ID: in.ID, Now: later, ExpiresAt: later.Add(time.Minute)})
		wantCode(t, err, protocol.Conflict)
		if st := f.instanceByID(in.ID).State(later); st != store.InstanceReaped {
			t.Fatalf("the reaped instance is %s", st)
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
