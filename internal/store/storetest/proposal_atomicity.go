package storetest

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// testProposalTurnEnded: once the proposal's turn has ended its frames
// cannot be appended, so a transition carrying frames is conflict and
// changes nothing: no status, no audit row, no turn transition. Without
// frames (recovery and reconciliation) the transition goes through.
func testProposalTurnEnded(t *testing.T, f *fixture) {
	c, tr := f.running()
	pending := f.propose(c.ID, tr.RequestID)
	executing := f.confirm(f.propose(c.ID, tr.RequestID))
	f.park(tr.RequestID, true)
	f.finish(tr.RequestID, store.TurnCancelled, nil)

	attempts := func(what string) {
		t.Helper()
		snap := f.snapshot(pending.ID)
		now := f.tick()
		_, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: pending.ID, Now: now,
			Audit: proposalAudit(pending.ID, protocol.DecisionConfirmed, now), Frames: []store.NewFrame{confirmation(pending.ID, protocol.ConfirmationConfirmed)}})
		wantCode(t, err, protocol.Conflict)
		wantUnchanged(t, f, snap, "confirm "+what)

		_, resumed, err := f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: pending.ID, Status: store.ProposalCancelled, Now: now,
			Audit: proposalAudit(pending.ID, protocol.DecisionDenied, now), Frames: []store.NewFrame{confirmation(pending.ID, protocol.ConfirmationDenied)}})
		wantCode(t, err, protocol.Conflict)
		if resumed {
			t.Fatalf("close %s reported resumed", what)
		}
		wantUnchanged(t, f, snap, "close "+what)

		snap = f.snapshot(executing.ID)
		_, resumed, err = f.s.FinishProposal(f.ctx, store.FinishProposalParams{ID: executing.ID, Status: store.ProposalSucceeded, Now: now,
			Result: jsontext.Value(`{"runId":"r"}`), Audit: proposalAudit(executing.ID, protocol.DecisionExecuted, now), Also: appAudit(executing.ID, now),
			Frames: []store.NewFrame{confirmation(executing.ID, protocol.ConfirmationExecuted)}})
		wantCode(t, err, protocol.Conflict)
		if resumed {
			t.Fatalf("finish %s reported resumed", what)
		}
		wantUnchanged(t, f, snap, "finish "+what)
	}
	attempts("after the turn ended")
	// A newer turn is active: the old request still may not append.
	f.submit(c.ID)
	attempts("while a newer turn is active")

	// Without frames the proposals settle; the ended turn stays ended.
	before := f.get(c.ID)
	now := f.tick()
	p, resumed, err := f.s.FinishProposal(f.ctx, store.FinishProposalParams{ID: executing.ID, Status: store.ProposalSucceeded, Now: now,
		Result: jsontext.Value(`{"reconciled":true}`), Audit: proposalAudit(executing.ID, protocol.DecisionExecuted, now), Also: appAudit(executing.ID, now)})
	if err != nil || resumed {
		t.Fatalf("FinishProposal without frames = resumed %v, %v", resumed, err)
	}
	wantProposalState(t, p, store.ProposalSucceeded, executing.ConfirmedAt, &now, []byte(`{"reconciled":true}`), nil)
	if n := len(f.audits(executing.ID)); n != 3 {
		t.Fatalf("%d audit rows after reconciling, want 3", n)
	}
	p, resumed, err = f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: pending.ID, Status: store.ProposalCancelled, Now: now,
		ErrorCode: ptr(string(protocol.ServiceRestarted)), Audit: proposalAudit(pending.ID, protocol.DecisionDenied, now)})
	if err != nil || resumed || p.Status != store.ProposalCancelled {
		t.Fatalf("CloseProposal without frames = %s, resumed %v, %v", p.Status, resumed, err)
	}
	if n := len(f.audits(pending.ID)); n != 1 {
		t.Fatalf("%d audit rows after closing, want 1", n)
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnCancelled {
		t.Fatalf("ended turn is %s", g.Status)
	}
	if after := f.get(c.ID); after.NextSequence != before.NextSequence {
		t.Fatalf("frameless transitions appended frames: next_sequence %d -> %d", before.NextSequence, after.NextSequence)
	}
}

// testProposalInvalidFrames: a transition whose frames are invalid, or
// carry done (only FinishTurn writes done), is the caller's validation
// error and changes nothing, not even the parked turn.
func testProposalInvalidFrames(t *testing.T, f *fixture) {
	c, tr := f.running()
	pending := f.propose(c.ID, tr.RequestID)
	executing := f.confirm(f.propose(c.ID, tr.RequestID))
	f.park(tr.RequestID, true)
	for name, bad := range map[string]store.NewFrame{
		"an unknown confirmation state": confirmation(pending.ID, "maybe"),
		"no payload":                    {},
		"a done frame":                  {Payload: protocol.DonePayload{Outcome: protocol.OutcomeCompleted, LastSequence: 99}},
	} {
		frames := func(id string, state protocol.ConfirmationState) []store.NewFrame {
			// The bad frame comes second: the valid first one must not stay.
			return []store.NewFrame{confirmation(id, state), bad}
		}
		now := f.tick()
		snap := f.snapshot(pending.ID)
		_, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: pending.ID, Now: now,
			Audit: proposalAudit(pending.ID, protocol.DecisionConfirmed, now), Frames: frames(pending.ID, protocol.ConfirmationConfirmed)})
		if !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("confirm with %s: err = %v, want validation", name, err)
		}
		wantUnchanged(t, f, snap, "confirm with "+name)

		_, _, err = f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: pending.ID, Status: store.ProposalCancelled, Now: now,
			Audit: proposalAudit(pending.ID, protocol.DecisionDenied, now), Frames: frames(pending.ID, protocol.ConfirmationDenied)})
		if !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("close with %s: err = %v, want validation", name, err)
		}
		wantUnchanged(t, f, snap, "close with "+name)

		snap = f.snapshot(executing.ID)
		_, _, err = f.s.FinishProposal(f.ctx, store.FinishProposalParams{ID: executing.ID, Status: store.ProposalSucceeded, Now: now,
			Result: jsontext.Value(`{}`), Audit: proposalAudit(executing.ID, protocol.DecisionExecuted, now), Also: appAudit(executing.ID, now),
			Frames: frames(executing.ID, protocol.ConfirmationExecuted)})
		if !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("finish with %s: err = %v, want validation", name, err)
		}
		wantUnchanged(t, f, snap, "finish with "+name)
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnAwaitingConfirmation {
		t.Fatalf("turn is %s, want still awaiting_confirmation", g.Status)
	}
	// Only the frames of the setup: two proposals (two frames each) and a confirmation.
	wantTail(t, f, c.ID, tr.RequestID, 5, *executing.ConfirmedAt, confirmation(executing.ID, protocol.ConfirmationConfirmed).Payload)
}
