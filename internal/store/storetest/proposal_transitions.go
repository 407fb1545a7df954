package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// --- confirmation -------------------------------------------------------------

func testProposalConfirm(t *testing.T, f *fixture) {
	c, tr := f.running()
	p := f.propose(c.ID, tr.RequestID)
	before := f.get(c.ID)
	sig := f.s.FrameSignal(c.ID)
	now := f.tick()
	audit := proposalAudit(p.ID, protocol.DecisionConfirmed, now)
	frames := []store.NewFrame{confirmation(p.ID, protocol.ConfirmationConfirmed)}
	got, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Audit: audit, Frames: frames, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig, "ConfirmProposal")
	for _, g := range []store.Proposal{got, f.proposal(p.ID)} {
		wantProposal(t, g, p, p.CreatedAt)
		wantProposalState(t, g, store.ProposalExecuting, &now, nil, nil, nil)
	}
	rows := f.audits(p.ID)
	if len(rows) != 1 {
		t.Fatalf("%d audit rows after confirming, want 1", len(rows))
	}
	wantAudit(t, rows[0], audit)
	wantTail(t, f, c.ID, tr.RequestID, before.LastSequence(), now, payloads(frames)...)
	if g := f.turn(tr.RequestID); g.Status != store.TurnRunning {
		t.Fatalf("confirming moved the turn to %s", g.Status)
	}

	// A second confirmation is conflict and changes nothing.
	snap := f.snapshot(p.ID)
	later := f.tick()
	_, err = f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, later),
		Frames: []store.NewFrame{confirmation(p.ID, protocol.ConfirmationConfirmed)}, Now: later})
	wantStatusConflict(t, err, store.ProposalExecuting, "second confirm")
	wantUnchanged(t, f, snap, "second confirm")

	_, err = f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: newID(), Audit: proposalAudit("x", "confirmed", now), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

// testProposalConfirmConcurrent: of many confirmations of one pending
// proposal, exactly one succeeds, with one audit row and one frame.
func testProposalConfirmConcurrent(t *testing.T, f *fixture) {
	c, tr := f.running()
	for round := range 5 {
		p := f.propose(c.ID, tr.RequestID)
		before := f.get(c.ID)
		now := f.tick()
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, errs[i] = f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Now: now,
					Audit:  proposalAudit(p.ID, protocol.DecisionConfirmed, now),
					Frames: []store.NewFrame{confirmation(p.ID, protocol.ConfirmationConfirmed)}})
			})
		}
		wg.Wait()
		var ok int
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			wantStatusConflict(t, err, store.ProposalExecuting, fmt.Sprintf("round %d: losing confirm", round))
		}
		if ok != 1 {
			t.Fatalf("round %d: %d confirmations succeeded, want exactly 1", round, ok)
		}
		wantProposalState(t, f.proposal(p.ID), store.ProposalExecuting, &now, nil, nil, nil)
		if rows := f.audits(p.ID); len(rows) != 1 {
			t.Fatalf("round %d: %d audit rows, want 1", round, len(rows))
		}
		wantTail(t, f, c.ID, tr.RequestID, before.LastSequence(), now, confirmation(p.ID, protocol.ConfirmationConfirmed).Payload)
	}
}

// testProposalConfirmRacesClose: a confirmation and a denial of one pending
// proposal race; exactly one wins and the other sees its outcome.
func testProposalConfirmRacesClose(t *testing.T, f *fixture) {
	c, tr := f.running()
	for round := range 10 {
		p := f.propose(c.ID, tr.RequestID)
		before := f.get(c.ID)
		now := f.tick()
		var confirmErr, closeErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			_, confirmErr = f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Now: now,
				Audit:  proposalAudit(p.ID, protocol.DecisionConfirmed, now),
				Frames: []store.NewFrame{confirmation(p.ID, protocol.ConfirmationConfirmed)}})
		})
		wg.Go(func() {
			_, _, closeErr = f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: p.ID, Status: store.ProposalCancelled, Now: now,
				Audit:  proposalAudit(p.ID, protocol.DecisionDenied, now),
				Frames: []store.NewFrame{confirmation(p.ID, protocol.ConfirmationDenied)}})
		})
		wg.Wait()
		got := f.proposal(p.ID)
		var state protocol.ConfirmationState
		switch {
		case confirmErr == nil && closeErr != nil:
			wantStatusConflict(t, closeErr, store.ProposalExecuting, fmt.Sprintf("round %d: close after confirm", round))
			wantProposalState(t, got, store.ProposalExecuting, &now, nil, nil, nil)
			state = protocol.ConfirmationConfirmed
		case closeErr == nil && confirmErr != nil:
			wantStatusConflict(t, confirmErr, store.ProposalCancelled, fmt.Sprintf("round %d: confirm after close", round))
			wantProposalState(t, got, store.ProposalCancelled, nil, &now, nil, nil)
			state = protocol.ConfirmationDenied
		default:
			t.Fatalf("round %d: confirm = %v, close = %v; want exactly one to succeed", round, confirmErr, closeErr)
		}
		if rows := f.audits(p.ID); len(rows) != 1 {
			t.Fatalf("round %d: %d audit rows, want 1", round, len(rows))
		}
		wantTail(t, f, c.ID, tr.RequestID, before.LastSequence(), now, confirmation(p.ID, state).Payload)
	}
}

// --- execution outcome ----------------------------------------------------------

func testProposalFinishSucceeded(t *testing.T, f *fixture) {
	c, tr := f.running()
	p := f.confirm(f.propose(c.ID, tr.RequestID))
	f.park(tr.RequestID, true)
	if g := f.turn(tr.RequestID); g.Status != store.TurnAwaitingConfirmation {
		t.Fatalf("parked turn is %s", g.Status)
	}
	before := f.get(c.ID)
	confirmRows := f.audits(p.ID)
	sig := f.s.FrameSignal(c.ID)
	now := f.tick()
	result := jsontext.Value(`{"runId":"run-1", "status":"queued", "counts":[1,2]}`)
	audit := proposalAudit(p.ID, protocol.DecisionExecuted, now)
	also := appAudit(p.ID, now)
	frames := []store.NewFrame{confirmation(p.ID, protocol.ConfirmationExecuted),
		{Payload: protocol.ToolResultPayload{CallID: p.CallID, OK: true, Result: result}}}
	got, resumed, err := f.s.FinishProposal(f.ctx, store.FinishProposalParams{ID: p.ID, Status: store.ProposalSucceeded,
		Result: result, Audit: audit, Also: also, Frames: frames, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig, "FinishProposal")
	if !resumed {
		t.Fatal("finishing the proposal of an awaiting turn did not report resumed")
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnRunning {
		t.Fatalf("resumed turn is %s, want running", g.Status)
	}
	for _, g := range []store.Proposal{got, f.proposal(p.ID)} {
		wantProposal(t, g, p, p.CreatedAt)
		wantProposalState(t, g, store.ProposalSucceeded, p.ConfirmedAt, &now, result, nil)
	}
	rows := f.audits(p.ID)
	if len(rows) != 3 || rows[2].ID != confirmRows[0].ID {
		t.Fatalf("audit rows = %+v, want the confirmation's and two more", rows)
	}
	for _, r := range rows[:2] {
		switch r.Action {
		case audit.Action:
			wantAudit(t, r, audit)
		case also.Action:
			wantAudit(t, r, *also)
		default:
			t.Fatalf("unexpected audit row %+v", r)
		}
	}
	if rows[0].Action == rows[1].Action {
		t.Fatalf("audit rows %+v, want the finish row and the Also row", rows[:2])
	}
	wantTail(t, f, c.ID, tr.RequestID, before.LastSequence(), now, payloads(frames)...)

	// Finished is final.
	snap := f.snapshot(p.ID)
	_, _, err = f.s.FinishProposal(f.ctx, store.FinishProposalParams{ID: p.ID, Status: store.ProposalFailed, ErrorCode: ptr("x"),
		Audit: proposalAudit(p.ID, protocol.DecisionFailed, now), Now: f.tick()})
	wantStatusConflict(t, err, store.ProposalSucceeded, "finishing twice")
	_, _, err = f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: p.ID, Status: store.ProposalCancelled,
		Audit: proposalAudit(p.ID, protocol.DecisionDenied, now), Now: f.tick()})
	wantStatusConflict(t, err, store.ProposalSucceeded, "closing a finished proposal")
	_, err = f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, now), Now: f.tick()})
	wantStatusConflict(t, err, store.ProposalSucceeded, "confirming a finished proposal")
	wantUnchanged(t, f, snap, "transitions of a finished proposal")
}

func testProposalFinishFailed(t *testing.T, f *fixture) {
	c, tr := f.running()
	p := f.confirm(f.propose(c.ID, tr.RequestID))
	before := f.get(c.ID)
	now := f.tick()
	code := string(protocol.Conflict)
	audit := proposalAudit(p.ID, protocol.DecisionFailed, now)
	frames := []store.NewFrame{confirmation(p.ID, protocol.ConfirmationFailed),
		{Payload: protocol.ToolResultPayload{CallID: p.CallID, Error: protocol.Errorf(protocol.Conflict, "the target changed")}}}
	got, resumed, err := f.s.FinishProposal(f.ctx, store.FinishProposalParams{ID: p.ID, Status: store.ProposalFailed,
		ErrorCode: &code, Audit: audit, Frames: frames, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// The turn never parked: nothing to resume, and it keeps running.
	if resumed {
		t.Fatal("finishing the proposal of a running turn reported resumed")
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnRunning {
		t.Fatalf("turn is %s, want running", g.Status)
	}
	for _, g := range []store.Proposal{got, f.proposal(p.ID)} {
		wantProposalState(t, g, store.ProposalFailed, p.ConfirmedAt, &now, nil, &code)
	}
	if rows := f.audits(p.ID); len(rows) != 2 {
		t.Fatalf("%d audit rows, want the confirmation's and the failure's", len(rows))
	} else {
		wantAudit(t, rows[0], audit)
	}
	wantTail(t, f, c.ID, tr.RequestID, before.LastSequence(), now, payloads(frames)...)
}

func testProposalFinishRefused(t *testing.T, f *fixture) {
	c, tr := f.running()
	pending := f.propose(c.ID, tr.RequestID)
	executing := f.confirm(f.propose(c.ID, tr.RequestID))
	f.park(tr.RequestID, true)
	finish := func(id string, status store.ProposalStatus) error {
		now := f.tick()
		_, resumed, err := f.s.FinishProposal(f.ctx, store.FinishProposalParams{ID: id, Status: status, Result: jsontext.Value(`{}`),
			Audit: proposalAudit(id, protocol.DecisionExecuted, now), Also: appAudit(id, now), Now: now,
			Frames: []store.NewFrame{confirmation(id, protocol.ConfirmationExecuted)}})
		if err != nil && resumed {
			t.Fatalf("a refused finish reported resumed")
		}
		return err
	}

	// Only an executing proposal finishes.
	snap := f.snapshot(pending.ID)
	wantStatusConflict(t, finish(pending.ID, store.ProposalSucceeded), store.ProposalPending, "finishing a pending proposal")
	wantUnchanged(t, f, snap, "finishing a pending proposal")

	// Only as succeeded or failed.
	wantStatusesRefused(t, f, executing.ID, "finish", finish,
		store.ProposalPending, store.ProposalExecuting, store.ProposalCancelled, store.ProposalConfirmed, "")
	wantCode(t, finish(newID(), store.ProposalSucceeded), protocol.NotFound)
}

// --- closing ------------------------------------------------------------------

func testProposalClose(t *testing.T, f *fixture) {
	for _, tc := range []struct {
		status   store.ProposalStatus
		code     *string
		state    protocol.ConfirmationState
		awaiting bool
	}{
		{store.ProposalCancelled, ptr(string(protocol.Denied)), protocol.ConfirmationDenied, true},
		{store.ProposalExpired, nil, protocol.ConfirmationExpired, false},
		{store.ProposalConflict, ptr(string(protocol.StaleContext)), protocol.ConfirmationFailed, true},
	} {
		c, tr := f.running()
		p := f.propose(c.ID, tr.RequestID)
		if tc.awaiting {
			f.park(tr.RequestID, true)
		}
		before := f.get(c.ID)
		sig := f.s.FrameSignal(c.ID)
		now := f.tick()
		audit := proposalAudit(p.ID, protocol.Decision(tc.status), now)
		frames := []store.NewFrame{confirmation(p.ID, tc.state),
			{Payload: protocol.ToolResultPayload{CallID: p.CallID, Error: protocol.Errorf(protocol.Denied, "not executed")}}}
		got, resumed, err := f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: p.ID, Status: tc.status, ErrorCode: tc.code,
			Audit: audit, Frames: frames, Now: now})
		if err != nil {
			t.Fatalf("close as %s: %v", tc.status, err)
		}
		waitClosed(t, sig, "CloseProposal")
		if resumed != tc.awaiting {
			t.Fatalf("close as %s of a %s turn: resumed = %v", tc.status, map[bool]string{true: "parked", false: "running"}[tc.awaiting], resumed)
		}
		if g := f.turn(tr.RequestID); g.Status != store.TurnRunning {
			t.Fatalf("close as %s: turn is %s, want running", tc.status, g.Status)
		}
		for _, g := range []store.Proposal{got, f.proposal(p.ID)} {
			wantProposal(t, g, p, p.CreatedAt)
			wantProposalState(t, g, tc.status, nil, &now, nil, tc.code)
		}
		rows := f.audits(p.ID)
		if len(rows) != 1 {
			t.Fatalf("close as %s: %d audit rows, want 1", tc.status, len(rows))
		}
		wantAudit(t, rows[0], audit)
		wantTail(t, f, c.ID, tr.RequestID, before.LastSequence(), now, payloads(frames)...)

		// Closed is final.
		snap := f.snapshot(p.ID)
		for _, st := range []store.ProposalStatus{store.ProposalCancelled, store.ProposalExpired} {
			_, _, err = f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: p.ID, Status: st,
				Audit: proposalAudit(p.ID, protocol.Decision(st), now), Now: f.tick()})
			wantStatusConflict(t, err, tc.status, "closing twice")
		}
		_, err = f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, now), Now: f.tick()})
		wantStatusConflict(t, err, tc.status, "confirming a closed proposal")
		wantUnchanged(t, f, snap, "transitions of a closed proposal")
	}
}

func testProposalCloseRefused(t *testing.T, f *fixture) {
	c, tr := f.running()
	pending := f.propose(c.ID, tr.RequestID)
	executing := f.confirm(f.propose(c.ID, tr.RequestID))
	f.park(tr.RequestID, true)
	closeAs := func(id string, status store.ProposalStatus) error {
		now := f.tick()
		_, resumed, err := f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: id, Status: status, ErrorCode: ptr("x"),
			Audit: proposalAudit(id, protocol.DecisionDenied, now), Now: now,
			Frames: []store.NewFrame{confirmation(id, protocol.ConfirmationDenied)}})
		if err != nil && resumed {
			t.Fatalf("a refused close reported resumed")
		}
		return err
	}

	// An executing proposal is past closing: it finishes.
	snap := f.snapshot(executing.ID)
	wantStatusConflict(t, closeAs(executing.ID, store.ProposalCancelled), store.ProposalExecuting, "closing an executing proposal")
	wantUnchanged(t, f, snap, "closing an executing proposal")

	wantStatusesRefused(t, f, pending.ID, "close", closeAs,
		store.ProposalSucceeded, store.ProposalFailed, store.ProposalPending, store.ProposalExecuting, "")
	wantCode(t, closeAs(newID(), store.ProposalCancelled), protocol.NotFound)
}

// --- parking --------------------------------------------------------------------

func testAwaitConfirmation(t *testing.T, f *fixture) {
	// An unknown turn does not park, and is no error.
	f.park(newID(), false)

	c, tr := f.running()
	wantTurn := func(status store.TurnStatus) {
		t.Helper()
		if g := f.turn(tr.RequestID); g.Status != status {
			t.Fatalf("turn is %s, want %s", g.Status, status)
		}
	}
	// No proposal, or only another turn's: nothing to wait for.
	f.park(tr.RequestID, false)
	o, ot := f.running()
	f.propose(o.ID, ot.RequestID)
	f.park(tr.RequestID, false)
	wantTurn(store.TurnRunning)

	// A queued turn does not park, though its proposal is pending.
	q := f.conversation()
	qt, _ := f.submit(q.ID)
	f.propose(q.ID, qt.RequestID)
	f.park(qt.RequestID, false)
	if g := f.turn(qt.RequestID); g.Status != store.TurnQueued {
		t.Fatalf("queued turn is %s", g.Status)
	}

	// A pending proposal parks the turn, once.
	p := f.propose(c.ID, tr.RequestID)
	f.park(tr.RequestID, true)
	wantTurn(store.TurnAwaitingConfirmation)
	f.park(tr.RequestID, false)
	wantTurn(store.TurnAwaitingConfirmation)

	// Closing it resumes the turn; a closed proposal parks nothing.
	now := f.tick()
	if _, resumed, err := f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: p.ID, Status: store.ProposalExpired,
		Audit: proposalAudit(p.ID, "expired", now), Now: now}); err != nil || !resumed {
		t.Fatalf("CloseProposal = resumed %v, %v", resumed, err)
	}
	wantTurn(store.TurnRunning)
	f.park(tr.RequestID, false)
	wantTurn(store.TurnRunning)

	// An executing proposal parks it too, until it finishes.
	p2 := f.confirm(f.propose(c.ID, tr.RequestID))
	f.park(tr.RequestID, true)
	wantTurn(store.TurnAwaitingConfirmation)
	now = f.tick()
	if _, resumed, err := f.s.FinishProposal(f.ctx, store.FinishProposalParams{ID: p2.ID, Status: store.ProposalSucceeded,
		Result: jsontext.Value(`{"ok":true}`), Audit: proposalAudit(p2.ID, "executed", now), Now: now}); err != nil || !resumed {
		t.Fatalf("FinishProposal = resumed %v, %v", resumed, err)
	}
	wantTurn(store.TurnRunning)
	f.park(tr.RequestID, false)

	// A finished turn never parks, whatever its proposals.
	f.propose(c.ID, tr.RequestID)
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	f.park(tr.RequestID, false)
	wantTurn(store.TurnCompleted)
}
