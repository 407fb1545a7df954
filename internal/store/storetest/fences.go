package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseFences checks fencing (store.Fence): ownership epochs increase
// with every change of owner, a reaped or stopped instance can write
// nothing, and a confirmed command's write commits only while its
// proposal is still its executor's, at most once.
func ExerciseFences(t *testing.T, open func(t *testing.T) store.Store) {
	run := subtests(t, open)
	run("EpochsIncrease", testEpochsIncrease)
	run("ReapedInstanceWritesNothing", testReapedInstanceWritesNothing)
	run("StoppedInstanceIsNotReaped", testStoppedInstanceIsNotReaped)
	run("ExecutionAfterTakeover", testExecutionAfterTakeover)
	run("ExecutionAtMostOnce", testExecutionAtMostOnce)
	run("OutcomeAfterTakeover", testOutcomeAfterTakeover)
}

// fenced is the fixture's context carrying a fence.
func (f *fixture) fenced(f2 store.Fence) context.Context { return store.WithFence(f.ctx, f2) }

func wantFenced(t *testing.T, what string, err error) {
	t.Helper()
	if !store.IsFenced(err) {
		t.Fatalf("%s: err = %v, want a write refused by its fence", what, err)
	}
}

// testEpochsIncrease: every change of a turn's or proposal's owner — a
// start, a park, a confirmation, a takeover — increases its epoch.
func testEpochsIncrease(t *testing.T, f *fixture) {
	a := f.instance(time.Second)
	b := f.instance(time.Hour)
	queued := f.queuedOn(a.ID)
	conv, tr := f.runningOn(a.ID)
	if tr.Epoch <= queued.Epoch {
		t.Fatalf("epoch after start %d, want more than the queued turn's %d", tr.Epoch, queued.Epoch)
	}
	p := f.propose(conv.ID, tr.RequestID)
	f.park(tr.RequestID, true)
	parked := f.turn(tr.RequestID)
	if parked.Owner != "" || parked.Epoch <= tr.Epoch {
		t.Fatalf("parked turn owned by %q at epoch %d, want no owner after epoch %d", parked.Owner, parked.Epoch, tr.Epoch)
	}
	now := f.tick()
	confirmed, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Now: now, Instance: a.ID,
		Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, now)})
	if err != nil {
		t.Fatal(err)
	}
	if confirmed.Owner != a.ID || confirmed.Epoch <= p.Epoch {
		t.Fatalf("confirmed proposal owned by %q at epoch %d, want %s after epoch %d", confirmed.Owner, confirmed.Epoch, a.ID, p.Epoch)
	}
	executing := f.turn(tr.RequestID)
	if executing.Owner != a.ID || executing.Epoch <= parked.Epoch {
		t.Fatalf("turn of the confirmed proposal owned by %q at epoch %d, want %s after %d", executing.Owner, executing.Epoch, a.ID, parked.Epoch)
	}
	f.clock.Advance(2 * time.Second)
	f.reap(b.ID)
	adopted, err := f.s.AdoptTurn(f.ctx, store.AdoptTurnParams{RequestID: tr.RequestID, From: a.ID, To: b.ID, Proposals: []string{p.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if adopted.Owner != b.ID || adopted.Epoch <= executing.Epoch {
		t.Fatalf("adopted turn owned by %q at epoch %d, want %s after %d", adopted.Owner, adopted.Epoch, b.ID, executing.Epoch)
	}
	if got := f.proposal(p.ID); got.Owner != b.ID || got.Epoch <= confirmed.Epoch {
		t.Fatalf("taken-over proposal owned by %q at epoch %d, want %s after %d", got.Owner, got.Epoch, b.ID, confirmed.Epoch)
	}
}

// testReapedInstanceWritesNothing: once an instance is reaped, a write
// fenced by it fails — an append to its own running turn, a confirmation,
// a claim — and changes nothing; the same writes of a live instance pass.
func testReapedInstanceWritesNothing(t *testing.T, f *fixture) {
	dead := f.instance(time.Second)
	live := f.instance(time.Hour)
	conv, tr := f.runningOn(dead.ID)
	liveConv, liveTurn := f.runningOn(live.ID)
	before := len(f.frames(conv.ID))
	if _, err := f.s.AppendFrames(f.fenced(store.Fence{Instance: dead.ID}), appendParams(conv.ID, tr.RequestID, f.tick(), text("before"))); err != nil {
		t.Fatalf("append before the reaping: %v", err)
	}
	f.clock.Advance(2 * time.Second)
	if got := f.reap(live.ID); len(got) != 1 || got[0] != dead.ID {
		t.Fatalf("reaped %v", got)
	}
	_, err := f.s.AppendFrames(f.fenced(store.Fence{Instance: dead.ID}), appendParams(conv.ID, tr.RequestID, f.tick(), text("after")))
	wantFenced(t, "append of a reaped instance", err)
	if n := len(f.frames(conv.ID)); n != before+1 {
		t.Fatalf("%d frames, want %d: the refused append wrote", n, before+1)
	}
	// An append to a turn the instance does not own is refused too.
	_, err = f.s.AppendFrames(f.fenced(store.Fence{Instance: live.ID}), appendParams(conv.ID, tr.RequestID, f.tick(), text("not mine")))
	wantFenced(t, "append to another instance's turn", err)
	if _, err := f.s.AppendFrames(f.fenced(store.Fence{Instance: live.ID}), appendParams(liveConv.ID, liveTurn.RequestID, f.tick(), text("mine"))); err != nil {
		t.Fatalf("append of a live instance: %v", err)
	}

	p := f.propose(liveConv.ID, liveTurn.RequestID)
	f.park(liveTurn.RequestID, true)
	now := f.tick()
	_, err = f.s.ConfirmProposal(f.fenced(store.Fence{Instance: dead.ID, Hold: true}), store.ConfirmProposalParams{ID: p.ID, Now: now,
		Instance: dead.ID, Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, now)})
	wantFenced(t, "confirmation by a reaped instance", err)
	if got := f.proposal(p.ID); got.Status != store.ProposalPending || len(f.audits(p.ID)) != 0 {
		t.Fatalf("proposal after a refused confirmation: %s with %d audit rows", got.Status, len(f.audits(p.ID)))
	}

	q := f.queuedOn("")
	_, ok, err := f.s.ClaimTurn(f.fenced(store.Fence{Instance: dead.ID, Hold: true}), store.ClaimTurnParams{Instance: dead.ID, Now: f.tick()})
	wantFenced(t, "claim by a reaped instance", err)
	if ok || f.turn(q.RequestID).Status != store.TurnQueued {
		t.Fatal("a reaped instance claimed a turn")
	}
}

// testStoppedInstanceIsNotReaped: an instance that stopped cleanly is not
// reaped (it ended its lease itself), writes nothing more, and what it
// left is orphaned work for the others.
func testStoppedInstanceIsNotReaped(t *testing.T, f *fixture) {
	gone := f.instance(time.Second)
	live := f.instance(time.Hour)
	conv, tr := f.runningOn(gone.ID)
	if err := f.s.StopInstance(f.ctx, store.StopInstanceParams{ID: gone.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Second)
	if got := f.reap(live.ID); len(got) != 0 {
		t.Fatalf("reaped %v, want none: a stopped instance is not reaped", got)
	}
	_, err := f.s.AppendFrames(f.fenced(store.Fence{Instance: gone.ID}), appendParams(conv.ID, tr.RequestID, f.tick(), text("late")))
	wantFenced(t, "append of a stopped instance", err)
	w, err := f.s.OrphanedWork(f.ctx, store.OrphanedWorkParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Turns) != 1 || w.Turns[0].RequestID != tr.RequestID {
		t.Fatalf("orphaned turns = %+v, want the stopped instance's running turn", w.Turns)
	}
}

// confirmedOn returns a turn and its proposal, confirmed by instance:
// executing there.
func (f *fixture) confirmedOn(instance string) (store.Turn, store.Proposal) {
	f.t.Helper()
	conv, tr := f.runningOn(instance)
	p := f.propose(conv.ID, tr.RequestID)
	f.park(tr.RequestID, true)
	now := f.tick()
	p, err := f.s.ConfirmProposal(f.fenced(store.Fence{Instance: instance, Hold: true}), store.ConfirmProposalParams{ID: p.ID, Now: now,
		Instance: instance, Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, now)})
	if err != nil {
		f.t.Fatal(err)
	}
	return tr, p
}

// adminEvents lists the audit trail, newest first.
func (f *fixture) adminEvents() []store.AdminEvent {
	f.t.Helper()
	rows, err := f.s.ListAdminEvents(f.ctx, store.ListAdminEventsParams{Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return rows
}

// takenOver returns a proposal that instance a confirmed and that b took
// over with its turn when a's lease expired (a can never execute it).
func (f *fixture) takenOver() (a, b store.Instance, p store.Proposal) {
	f.t.Helper()
	a, b = f.instance(time.Second), f.instance(time.Hour)
	tr, p := f.confirmedOn(a.ID)
	f.clock.Advance(2 * time.Second)
	f.reap(b.ID)
	if _, err := f.s.AdoptTurn(f.ctx, store.AdoptTurnParams{RequestID: tr.RequestID, From: a.ID, To: b.ID, Proposals: []string{p.ID}}); err != nil {
		f.t.Fatal(err)
	}
	return a, b, p
}

// commandWrite is a confirmed command's own write under fence: an audit
// row, as every application command writes with its change.
func (f *fixture) commandWrite(fence store.Fence) error {
	_, err := f.s.AppendAdminEvent(f.fenced(fence), store.AppendAdminEventParams{Actor: "studio_operator", Action: "studio.app.command",
		Details: []byte(`{"command":"test"}`), Now: f.tick()})
	return err
}

// testExecutionAfterTakeover: once a reaper took a proposal from its
// executor, the executor's command write is refused, whichever instance's
// lease it still has, at the epoch it had.
func testExecutionAfterTakeover(t *testing.T, f *fixture) {
	a, b, p := f.takenOver()
	rows := len(f.adminEvents())
	err := f.commandWrite(store.Fence{Instance: a.ID, ProposalID: p.ID, ProposalEpoch: p.Epoch, Execute: true, Now: f.tick()})
	wantFenced(t, "execution after the takeover", err)
	// Even by the live instance that took it over, at the old epoch.
	err = f.commandWrite(store.Fence{Instance: b.ID, ProposalID: p.ID, ProposalEpoch: p.Epoch, Execute: true, Now: f.tick()})
	wantFenced(t, "execution by another instance", err)
	if n := len(f.adminEvents()); n != rows {
		t.Fatalf("%d audit rows after refused executions, want %d", n, rows)
	}
	if got := f.proposal(p.ID); got.ExecutedAt != nil {
		t.Fatalf("proposal marked executed at %v", got.ExecutedAt)
	}
}

// testExecutionAtMostOnce: the command's write marks the proposal
// executed in its transaction; a second try (its first commit's answer
// lost) is refused as executed already, and writes nothing.
func testExecutionAtMostOnce(t *testing.T, f *fixture) {
	a := f.instance(time.Hour)
	_, p := f.confirmedOn(a.ID)
	fence := store.Fence{Instance: a.ID, ProposalID: p.ID, ProposalEpoch: p.Epoch, Execute: true, Now: f.tick()}
	rows := len(f.adminEvents())
	if err := f.commandWrite(fence); err != nil {
		t.Fatalf("the command's write: %v", err)
	}
	got := f.proposal(p.ID)
	if got.ExecutedAt == nil {
		t.Fatal("the proposal is not marked executed")
	}
	// It names the audit row its command's write appended: what ran.
	if rows := f.adminEvents(); got.ExecutedAuditID != rows[0].ID || rows[0].Action != "studio.app.command" {
		t.Fatalf("executed audit row %d, want the command's %d (%s)", got.ExecutedAuditID, rows[0].ID, rows[0].Action)
	}
	err := f.commandWrite(fence)
	if !store.IsAlreadyExecuted(err) {
		t.Fatalf("second try: err = %v, want executed already", err)
	}
	if n := len(f.adminEvents()); n != rows+1 {
		t.Fatalf("%d audit rows, want %d: the command wrote twice", n, rows+1)
	}
	// Recording the outcome is fenced too, and passes for its executor.
	now := f.tick()
	if _, _, err := f.s.FinishProposal(f.fenced(store.Fence{Instance: a.ID, ProposalID: p.ID, ProposalEpoch: p.Epoch}),
		store.FinishProposalParams{ID: p.ID, Status: store.ProposalSucceeded, Now: now, Instance: a.ID,
			Audit: proposalAudit(p.ID, protocol.DecisionExecuted, now)}); err != nil {
		t.Fatalf("record the outcome: %v", err)
	}
}

// testOutcomeAfterTakeover: an executor that lost its proposal cannot
// record an outcome for it: the instance that took it over records it.
func testOutcomeAfterTakeover(t *testing.T, f *fixture) {
	a, _, p := f.takenOver()
	now := f.tick()
	_, _, err := f.s.FinishProposal(f.fenced(store.Fence{Instance: a.ID, ProposalID: p.ID, ProposalEpoch: p.Epoch}),
		store.FinishProposalParams{ID: p.ID, Status: store.ProposalSucceeded, Now: now, Instance: a.ID,
			Audit: proposalAudit(p.ID, protocol.DecisionExecuted, now)})
	wantFenced(t, "outcome after the takeover", err)
	if got := f.proposal(p.ID); got.Status != store.ProposalExecuting || got.Owner == a.ID {
		t.Fatalf("proposal = %s owned by %q, want executing, no longer %s's", got.Status, got.Owner, a.ID)
	}
}
