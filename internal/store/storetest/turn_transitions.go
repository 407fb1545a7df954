package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testStartTurn(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	now := f.tick()
	got, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.TurnRunning || got.StartedAt == nil || !got.StartedAt.Equal(now) {
		t.Fatalf("started = %+v", got)
	}
	// running -> running is not a start.
	_, err = f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	if g := f.turn(tr.RequestID); !g.StartedAt.Equal(now) {
		t.Fatalf("refused start moved started_at to %v", g.StartedAt)
	}
	// A finished turn cannot start.
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	_, err = f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	if g := f.turn(tr.RequestID); g.Status != store.TurnCompleted {
		t.Fatalf("refused start changed status to %s", g.Status)
	}
	_, err = f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: newID(), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testFinishError(t *testing.T, f *fixture) {
	c, tr := f.running()
	f.append(c.ID, tr.RequestID, text("thinking"))
	now := f.tick()
	perr := protocol.Errorf(protocol.ModelFailure, "provider answered 500")
	got, frames, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: store.TurnFailed, Error: perr, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 {
		t.Fatalf("FinishTurn wrote %d frames, want error and done", len(frames))
	}
	wantSequences(t, frames, 3)
	wantError(t, frames[0], protocol.ModelFailure)
	wantDone(t, frames[1], protocol.OutcomeFailed)
	for _, fr := range frames {
		if fr.RequestID != tr.RequestID || !fr.CreatedAt.Equal(now) {
			t.Fatalf("frame %+v", fr)
		}
	}
	if got.Status != store.TurnFailed || got.ErrorCode == nil || *got.ErrorCode != string(protocol.ModelFailure) ||
		got.EndedAt == nil || !got.EndedAt.Equal(now) {
		t.Fatalf("finished turn = %+v", got)
	}
	stored := f.frames(c.ID)
	if len(stored) != 4 {
		t.Fatalf("stored %d frames, want 4", len(stored))
	}
	wantDone(t, stored[3], protocol.OutcomeFailed)
	conv := f.get(c.ID)
	if conv.ActiveRequestID != nil {
		t.Fatalf("active_request_id = %s after finish", *conv.ActiveRequestID)
	}
	// The conversation accepts a new turn at the done frame's sequence.
	if _, _, err := f.s.SubmitTurn(f.ctx, f.submitParams(c.ID, frames[1].Sequence)); err != nil {
		t.Fatalf("submit after finish: %v", err)
	}
}

func testFinishDone(t *testing.T, f *fixture) {
	for _, status := range []store.TurnStatus{store.TurnCompleted, store.TurnFailed, store.TurnCancelled} {
		c, tr := f.running()
		got, frames, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: status, Now: f.tick()})
		if err != nil {
			t.Fatal(err)
		}
		if len(frames) != 1 {
			t.Fatalf("%s: FinishTurn wrote %d frames, want done alone", status, len(frames))
		}
		wantSequences(t, frames, 2)
		wantDone(t, frames[0], status.Outcome())
		if got.Status != status || got.EndedAt == nil {
			t.Fatalf("%s: finished turn = %+v", status, got)
		}
		if status == store.TurnCompleted && got.ErrorCode != nil {
			t.Fatalf("completed turn has error code %s", *got.ErrorCode)
		}
		if f.get(c.ID).ActiveRequestID != nil {
			t.Fatalf("%s: conversation still active", status)
		}
	}
	// A queued turn may be finished without starting (e.g. a failure before
	// the worker picked it up).
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	frames := f.finish(tr.RequestID, store.TurnFailed, protocol.Errorf(protocol.ServiceFailure, "no worker"))
	wantError(t, frames[0], protocol.ServiceFailure)
	wantDone(t, frames[1], protocol.OutcomeFailed)
}

func testFinishTwice(t *testing.T, f *fixture) {
	c, tr := f.running()
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before := f.get(c.ID)
	_, frames, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: store.TurnFailed,
		Error: protocol.Errorf(protocol.ModelFailure, "late"), Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	if len(frames) != 0 {
		t.Fatalf("second finish returned %d frames", len(frames))
	}
	if after := f.get(c.ID); after.NextSequence != before.NextSequence {
		t.Fatalf("second finish appended frames: next %d -> %d", before.NextSequence, after.NextSequence)
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnCompleted || g.ErrorCode != nil {
		t.Fatalf("second finish changed the turn: %+v", g)
	}
	// Exactly one done frame.
	var dones int
	for _, fr := range f.frames(c.ID) {
		if fr.Type == protocol.FrameDone {
			dones++
		}
	}
	if dones != 1 {
		t.Fatalf("%d done frames, want 1", dones)
	}
}

func testFinishNotTerminal(t *testing.T, f *fixture) {
	c, tr := f.running()
	for _, status := range []store.TurnStatus{store.TurnQueued, store.TurnRunning, store.TurnAwaitingConfirmation, "bogus"} {
		if _, _, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: status, Now: f.tick()}); err == nil {
			t.Fatalf("FinishTurn with status %q succeeded", status)
		}
	}
	if g := f.get(c.ID); g.NextSequence != 2 || g.ActiveRequestID == nil {
		t.Fatalf("refused finishes changed the conversation: %+v", g)
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnRunning {
		t.Fatalf("refused finishes changed the turn: %+v", g)
	}
}

func testFinishMissing(t *testing.T, f *fixture) {
	_, _, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: newID(), Status: store.TurnCompleted, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func cancel(t *testing.T, f *fixture, requestID string) (store.Turn, []store.Frame) {
	t.Helper()
	tr, frames, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: requestID, Now: f.tick()})
	if err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	return tr, frames
}

func testCancelQueued(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	now := f.clock.Now().Add(time.Second)
	got, frames := cancel(t, f, tr.RequestID)
	if got.Status != store.TurnCancelled || got.CancelRequestedAt == nil || !got.CancelRequestedAt.Equal(now) ||
		got.EndedAt == nil || !got.EndedAt.Equal(now) {
		t.Fatalf("cancelled queued turn = %+v", got)
	}
	if len(frames) != 1 {
		t.Fatalf("cancel wrote %d frames, want done", len(frames))
	}
	wantSequences(t, frames, 2)
	wantDone(t, frames[0], protocol.OutcomeCancelled)
	if f.get(c.ID).ActiveRequestID != nil {
		t.Fatal("cancelled turn still holds the conversation")
	}
	// Idempotent: the same answer, nothing new.
	again, frames := cancel(t, f, tr.RequestID)
	if len(frames) != 0 || again.Status != store.TurnCancelled || !sameTime(again.CancelRequestedAt, got.CancelRequestedAt) || !sameTime(again.EndedAt, got.EndedAt) {
		t.Fatalf("second cancel = %+v with %d frames", again, len(frames))
	}
	if n := len(f.frames(c.ID)); n != 2 {
		t.Fatalf("%d frames after two cancels, want 2", n)
	}
	// A cancelled turn does not start.
	_, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
}

func testCancelRunning(t *testing.T, f *fixture) {
	c, tr := f.running()
	now := f.clock.Now().Add(time.Second)
	got, frames := cancel(t, f, tr.RequestID)
	if got.Status != store.TurnRunning || got.CancelRequestedAt == nil || !got.CancelRequestedAt.Equal(now) || got.EndedAt != nil {
		t.Fatalf("cancel of a running turn = %+v", got)
	}
	if len(frames) != 0 {
		t.Fatalf("cancel of a running turn wrote %d frames", len(frames))
	}
	conv := f.get(c.ID)
	if conv.ActiveRequestID == nil || conv.NextSequence != 2 {
		t.Fatalf("cancel of a running turn changed the conversation: %+v", conv)
	}
	// Idempotent: the first request time stays.
	again, frames := cancel(t, f, tr.RequestID)
	if len(frames) != 0 || again.Status != store.TurnRunning || !again.CancelRequestedAt.Equal(now) {
		t.Fatalf("second cancel = %+v", again)
	}
	if again.CancelRequestedBy != "" {
		t.Fatalf("a cancel by nobody recorded %q", again.CancelRequestedBy)
	}
	// The worker then ends the turn.
	done := f.finish(tr.RequestID, store.TurnCancelled, nil)
	wantDone(t, done[len(done)-1], protocol.OutcomeCancelled)
}

// testCancelRequestedBy: the principal that asks first is recorded, for
// a queued turn (cancelled at once) and a running one (its owner denies
// the proposals the cancel closes by it); a later asker changes nothing.
func testCancelRequestedBy(t *testing.T, f *fixture) {
	c := f.conversation()
	queued, _ := f.submit(c.ID)
	got, _, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: queued.RequestID, By: "ann", Now: f.tick()})
	if err != nil || got.Status != store.TurnCancelled || got.CancelRequestedBy != "ann" {
		t.Fatalf("cancel of a queued turn by ann = %+v, %v", got, err)
	}
	_, tr := f.running()
	for _, by := range []string{"ci-bot", "bob"} {
		if _, _, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: tr.RequestID, By: by, Now: f.tick()}); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.turn(tr.RequestID); got.CancelRequestedBy != "ci-bot" {
		t.Fatalf("cancelled by ci-bot, then bob: %+v; want ci-bot kept", got)
	}
}

func testCancelTerminal(t *testing.T, f *fixture) {
	c, tr := f.running()
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before := f.turn(tr.RequestID)
	got, frames := cancel(t, f, tr.RequestID)
	if len(frames) != 0 || got.Status != store.TurnCompleted || got.CancelRequestedAt != nil || !sameTime(got.EndedAt, before.EndedAt) {
		t.Fatalf("cancel of a completed turn = %+v with %d frames", got, len(frames))
	}
	if n := len(f.frames(c.ID)); n != 2 {
		t.Fatalf("%d frames, want 2", n)
	}
}

func testCancelMissing(t *testing.T, f *fixture) {
	_, _, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: newID(), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testRecoverTurns(t *testing.T, f *fixture) {
	queuedConv := f.conversation()
	qp := f.submitParams(queuedConv.ID, 0)
	qp.Instance = "gone" // held by the process that stopped
	queued, _, err := f.s.SubmitTurn(f.ctx, qp)
	if err != nil {
		t.Fatal(err)
	}
	runningConv, running := f.running()
	f.append(runningConv.ID, running.RequestID, text("half an answer"))
	doneConv, done := f.running()
	f.finish(done.RequestID, store.TurnCompleted, nil)
	doneFrames := f.frames(doneConv.ID)
	idle := f.conversation()

	now := f.tick()
	recovered, err := f.s.RecoverTurns(f.ctx, store.RecoverTurnsParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Turn{}
	for _, tr := range recovered {
		got[tr.RequestID] = tr
	}
	if len(recovered) != 2 || got[queued.RequestID].RequestID == "" || got[running.RequestID].RequestID == "" {
		t.Fatalf("recovered %v, want the queued and the running turn", slices.Collect(mapKeys(got)))
	}
	for _, tc := range []struct {
		conv    string
		turn    string
		lastSeq int64
	}{
		{queuedConv.ID, queued.RequestID, 3},
		{runningConv.ID, running.RequestID, 4},
	} {
		tr := f.turn(tc.turn)
		if tr.Status != store.TurnFailed || tr.ErrorCode == nil || *tr.ErrorCode != string(protocol.ServiceRestarted) || !sameTime(tr.EndedAt, &now) {
			t.Fatalf("recovered turn = %+v", tr)
		}
		frames := f.frames(tc.conv)
		if int64(len(frames)) != tc.lastSeq {
			t.Fatalf("conversation has %d frames, want %d", len(frames), tc.lastSeq)
		}
		wantError(t, frames[len(frames)-2], protocol.ServiceRestarted)
		wantDone(t, frames[len(frames)-1], protocol.OutcomeFailed)
		if c := f.get(tc.conv); c.ActiveRequestID != nil {
			t.Fatalf("recovered conversation still active: %+v", c)
		}
	}
	if g := f.turn(done.RequestID); g.Status != store.TurnCompleted {
		t.Fatalf("recovery touched a finished turn: %+v", g)
	}
	if n := len(f.frames(doneConv.ID)); n != len(doneFrames) {
		t.Fatalf("recovery appended to a finished conversation: %d -> %d frames", len(doneFrames), n)
	}
	if n := len(f.frames(idle.ID)); n != 0 {
		t.Fatalf("recovery appended to an idle conversation")
	}
	// A second recovery finds nothing.
	again, err := f.s.RecoverTurns(f.ctx, store.RecoverTurnsParams{Now: f.tick()})
	if err != nil || len(again) != 0 {
		t.Fatalf("second recovery = %v, %v", again, err)
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func testSetTurnContext(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	receipt := jsontext.Value(`{"view":{"space":"mission","route":"/"},"history":{"fromSequence":1,"toSequence":1,"hash":"abc"}}`)
	if err := f.s.SetTurnContext(f.ctx, store.SetTurnContextParams{RequestID: tr.RequestID, ContextJSON: receipt, ContextHash: "abc"}); err != nil {
		t.Fatal(err)
	}
	got := f.turn(tr.RequestID)
	if got.ContextHash != "abc" || !jsonEqual(t, got.ContextJSON, receipt) {
		t.Fatalf("turn context = %s / %s", got.ContextJSON, got.ContextHash)
	}
	if got.Status != store.TurnQueued || got.Instruction != tr.Instruction {
		t.Fatalf("SetTurnContext changed more than the context: %+v", got)
	}
	err := f.s.SetTurnContext(f.ctx, store.SetTurnContextParams{RequestID: newID(), ContextJSON: receipt, ContextHash: "abc"})
	wantCode(t, err, protocol.NotFound)
}
