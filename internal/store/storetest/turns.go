package storetest

import (
	"slices"
	"sync"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testSubmitFirst(t *testing.T, f *fixture) {
	c := f.conversation()
	p := f.submitParams(c.ID, 0)
	tr, fr, err := f.s.SubmitTurn(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if tr.RequestID != p.RequestID || tr.ConversationID != c.ID || tr.Instruction != p.Instruction ||
		tr.Status != store.TurnQueued || tr.ContextHash != p.ContextHash || !tr.CreatedAt.Equal(p.Now) ||
		tr.StartedAt != nil || tr.EndedAt != nil || tr.CancelRequestedAt != nil || tr.ErrorCode != nil {
		t.Fatalf("turn = %+v", tr)
	}
	if !jsonEqual(t, tr.ContextJSON, p.ContextJSON) {
		t.Fatalf("context_json = %s, want %s", tr.ContextJSON, p.ContextJSON)
	}
	if fr.Sequence != 1 || fr.ConversationID != c.ID || fr.RequestID != p.RequestID || fr.Type != protocol.FrameText || !fr.CreatedAt.Equal(p.Now) {
		t.Fatalf("first frame = %+v", fr)
	}
	want := protocol.TextPayload{Content: p.Instruction, Format: "plain", Role: protocol.RoleUser}
	if got := payloadOf(t, fr); got != want {
		t.Fatalf("first frame payload = %#v, want %#v", got, want)
	}
	conv := f.get(c.ID)
	if conv.ActiveRequestID == nil || *conv.ActiveRequestID != p.RequestID {
		t.Fatalf("active_request_id = %v, want %s", conv.ActiveRequestID, p.RequestID)
	}
	// acceptedSequence is the user frame's sequence and the conversation's tail.
	if conv.LastSequence() != fr.Sequence {
		t.Fatalf("last sequence = %d, accepted sequence %d", conv.LastSequence(), fr.Sequence)
	}
	stored := f.frames(c.ID)
	if len(stored) != 1 || stored[0].Sequence != fr.Sequence || !jsonEqual(t, stored[0].Payload, fr.Payload) {
		t.Fatalf("stored frames = %+v, want the user frame", stored)
	}
	if g := f.turn(p.RequestID); g.Status != store.TurnQueued || !jsonEqual(t, g.ContextJSON, p.ContextJSON) {
		t.Fatalf("GetTurn = %+v", g)
	}
	_, err = f.s.GetTurn(f.ctx, newID())
	wantCode(t, err, protocol.NotFound)

	// The second turn's user frame continues the conversation's sequence.
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	_, fr2 := f.submit(c.ID)
	if fr2.Sequence != 3 {
		t.Fatalf("second turn's user frame has sequence %d, want 3", fr2.Sequence)
	}
}

// wantNoTrace checks that a refused submission left nothing behind.
func wantNoTrace(t *testing.T, f *fixture, before store.Conversation, requestID string) {
	t.Helper()
	_, err := f.s.GetTurn(f.ctx, requestID)
	wantCode(t, err, protocol.NotFound)
	after := f.get(before.ID)
	if after.NextSequence != before.NextSequence || !slices.Equal(ptrSlice(after.ActiveRequestID), ptrSlice(before.ActiveRequestID)) {
		t.Fatalf("refused submission changed the conversation: %+v -> %+v", before, after)
	}
	if n := int64(len(f.frames(before.ID))); n != before.LastSequence() {
		t.Fatalf("refused submission left %d frames, want %d", n, before.LastSequence())
	}
	for _, fr := range f.frames(before.ID) {
		if fr.RequestID == requestID {
			t.Fatalf("refused submission wrote frame %d", fr.Sequence)
		}
	}
}

func ptrSlice(p *string) []string {
	if p == nil {
		return nil
	}
	return []string{*p}
}

func testSubmitActiveConflict(t *testing.T, f *fixture) {
	c := f.conversation()
	first, _ := f.submit(c.ID)
	before := f.get(c.ID)
	// Right sequence and wrong sequence alike: the active turn wins.
	for _, expected := range []int64{before.LastSequence(), 0, 99} {
		p := f.submitParams(c.ID, expected)
		_, _, err := f.s.SubmitTurn(f.ctx, p)
		pe := wantCode(t, err, protocol.Conflict)
		if pe.Details["activeRequestId"] != first.RequestID {
			t.Fatalf("details = %v, want activeRequestId %s", pe.Details, first.RequestID)
		}
		wantNoTrace(t, f, before, p.RequestID)
	}
}

func testSubmitStale(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	f.append(c.ID, tr.RequestID, text("a"), text("b"))
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before := f.get(c.ID)
	if before.LastSequence() != 4 {
		t.Fatalf("last sequence = %d, want 4", before.LastSequence())
	}
	for _, expected := range []int64{0, 1, 3, 5} {
		p := f.submitParams(c.ID, expected)
		_, _, err := f.s.SubmitTurn(f.ctx, p)
		pe := wantCode(t, err, protocol.StaleContext)
		if got := detailInt(t, pe, "actualLastSequence"); got != 4 {
			t.Fatalf("actualLastSequence = %d, want 4", got)
		}
		wantNoTrace(t, f, before, p.RequestID)
	}
	if _, _, err := f.s.SubmitTurn(f.ctx, f.submitParams(c.ID, 4)); err != nil {
		t.Fatalf("submit at the tail: %v", err)
	}
}

func testSubmitArchived(t *testing.T, f *fixture) {
	c := f.conversation()
	if _, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived), Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	before := f.get(c.ID)
	p := f.submitParams(c.ID, 0)
	_, _, err := f.s.SubmitTurn(f.ctx, p)
	wantCode(t, err, protocol.Conflict)
	wantNoTrace(t, f, before, p.RequestID)
}

func testSubmitDeletedMissing(t *testing.T, f *fixture) {
	c := f.conversation()
	if _, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: c.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	before := f.get(c.ID)
	p := f.submitParams(c.ID, 0)
	_, _, err := f.s.SubmitTurn(f.ctx, p)
	wantCode(t, err, protocol.NotFound)
	wantNoTrace(t, f, before, p.RequestID)

	p = f.submitParams(newID(), 0)
	_, _, err = f.s.SubmitTurn(f.ctx, p)
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.GetTurn(f.ctx, p.RequestID)
	wantCode(t, err, protocol.NotFound)
}

func testSubmitDuplicateRequest(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before := f.get(c.ID)
	p := f.submitParams(c.ID, before.LastSequence())
	p.RequestID = tr.RequestID
	if _, _, err := f.s.SubmitTurn(f.ctx, p); err == nil {
		t.Fatal("a reused request id was accepted")
	}
	after := f.get(c.ID)
	if after.NextSequence != before.NextSequence || after.ActiveRequestID != nil {
		t.Fatalf("refused submission changed the conversation: %+v", after)
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnCompleted {
		t.Fatalf("refused submission changed the old turn: %+v", g)
	}
}

func testSubmitConcurrent(t *testing.T, f *fixture) {
	for round := range 10 {
		c := f.conversation()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		params := []store.SubmitTurnParams{f.submitParams(c.ID, 0), f.submitParams(c.ID, 0)}
		for i := range 2 {
			wg.Go(func() { _, _, errs[i] = f.s.SubmitTurn(f.ctx, params[i]) })
		}
		wg.Wait()
		var ok, conflict int
		winner := ""
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
				winner = params[i].RequestID
			case protocol.IsCode(err, protocol.Conflict):
				conflict++
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if ok != 1 || conflict != 1 {
			t.Fatalf("round %d: %d succeeded and %d conflicted, want 1 and 1", round, ok, conflict)
		}
		frames := f.frames(c.ID)
		if len(frames) != 1 || frames[0].RequestID != winner {
			t.Fatalf("round %d: frames = %+v, want only the winner's user frame", round, frames)
		}
		if g := f.get(c.ID); *g.ActiveRequestID != winner {
			t.Fatalf("round %d: active request %s, winner %s", round, *g.ActiveRequestID, winner)
		}
	}
}
