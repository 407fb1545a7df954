package storetest

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseEngine runs the subtests of what the turn engine relies on
// beyond single transitions: pending effects expire at rest when
// they stop being valid, an archived conversation is read-only, and a
// cancelled turn records its cancel request.
func ExerciseEngine(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := subtests(t, open)
	run("Effects/SupersededByNewerTurn", testEffectsSuperseded)
	run("Effects/ExpiredWithArchiveAndDelete", testEffectsArchived)
	run("Effects/ExpireDue", testEffectsExpireDue)
	run("Conversation/ArchivedRefusesTitle", testArchivedTitle)
	run("FinishTurn/CancelledRecordsCancelRequest", testFinishCancelledRecordsRequest)
}

func testEffectsSuperseded(t *testing.T, f *fixture) {
	c, tr := f.running()
	pending := f.emit(c.ID, tr.RequestID)
	acked := f.emit(c.ID, tr.RequestID)
	f.ack(store.AckEffectParams{ID: acked.ID, Status: store.EffectRejected, RejectionCode: ptr("unsupported"), Now: f.tick()})
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	if e := f.effect(pending.ID); e.Status != store.EffectPending {
		t.Fatalf("an ended turn's effect is %s before a newer turn", e.Status)
	}
	f.submit(c.ID)
	if e := f.effect(pending.ID); e.Status != store.EffectExpired {
		t.Fatalf("a superseded effect is %s", e.Status)
	}
	if e := f.effect(acked.ID); e.Status != store.EffectRejected {
		t.Fatalf("an acknowledged effect became %s", e.Status)
	}
	_, err := f.s.AckEffect(f.ctx, store.AckEffectParams{ID: pending.ID, Status: store.EffectApplied, ClientRoute: ptr("/history"), Now: f.tick()})
	wantCode(t, err, protocol.StaleContext)
}

func testEffectsArchived(t *testing.T, f *fixture) {
	for _, archive := range []bool{true, false} {
		c, tr := f.running()
		e := f.emit(c.ID, tr.RequestID)
		f.finish(tr.RequestID, store.TurnCompleted, nil)
		var err error
		if archive {
			_, err = f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived), Now: f.tick()})
		} else {
			_, err = f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: c.ID, Now: f.tick()})
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := f.effect(e.ID); got.Status != store.EffectExpired {
			t.Fatalf("archive=%v: effect %s", archive, got.Status)
		}
	}
}

func testEffectsExpireDue(t *testing.T, f *fixture) {
	c, tr := f.running()
	due := f.emit(c.ID, tr.RequestID)     // expires 2 minutes after its emission
	later := f.emit(c.ID, tr.RequestID)   // a second later
	applied := f.emit(c.ID, tr.RequestID) // acknowledged: stays applied
	f.ack(store.AckEffectParams{ID: applied.ID, Status: store.EffectApplied, ClientRoute: ptr("/history"), Now: f.tick()})
	n, err := f.s.ExpireEffects(f.ctx, store.ExpireEffectsParams{Now: due.ExpiresAt.Add(-time.Second)})
	if err != nil || n != 0 {
		t.Fatalf("nothing due: %d %v", n, err)
	}
	n, err = f.s.ExpireEffects(f.ctx, store.ExpireEffectsParams{Now: due.ExpiresAt})
	if err != nil || n != 1 {
		t.Fatalf("one due: %d %v", n, err)
	}
	if f.effect(due.ID).Status != store.EffectExpired || f.effect(later.ID).Status != store.EffectPending ||
		f.effect(applied.ID).Status != store.EffectApplied {
		t.Fatalf("statuses %s %s %s", f.effect(due.ID).Status, f.effect(later.ID).Status, f.effect(applied.ID).Status)
	}
	if n, err := f.s.ExpireEffects(f.ctx, store.ExpireEffectsParams{Now: due.ExpiresAt}); err != nil || n != 0 {
		t.Fatalf("again: %d %v", n, err)
	}
}

func testArchivedTitle(t *testing.T, f *fixture) {
	c := f.conversation()
	if _, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived), Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	before := f.get(c.ID)
	for _, st := range []*store.ConversationStatus{nil, ptr(store.ConversationArchived)} {
		_, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Title: ptr("renamed"), Status: st, Now: f.tick()})
		wantCode(t, err, protocol.Conflict)
	}
	if got := f.get(c.ID); *got.Title != *before.Title || !got.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("a refused rename changed %+v", got)
	}
	// Unarchiving and renaming at once is allowed.
	got, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Title: ptr("renamed"),
		Status: ptr(store.ConversationActive), Now: f.tick()})
	if err != nil || got.Status != store.ConversationActive || *got.Title != "renamed" {
		t.Fatalf("unarchive and rename: %+v %v", got, err)
	}
}

func testFinishCancelledRecordsRequest(t *testing.T, f *fixture) {
	_, tr := f.running()
	now := f.clock.Now().Add(time.Second)
	f.finish(tr.RequestID, store.TurnCancelled, nil)
	got := f.turn(tr.RequestID)
	if got.CancelRequestedAt == nil || !got.CancelRequestedAt.Equal(now) {
		t.Fatalf("cancel_requested_at %v, want %v", got.CancelRequestedAt, now)
	}
	// An earlier request is kept.
	_, tr = f.running()
	req, _, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: tr.RequestID, Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	f.finish(tr.RequestID, store.TurnCancelled, nil)
	if got := f.turn(tr.RequestID); !got.CancelRequestedAt.Equal(*req.CancelRequestedAt) {
		t.Fatalf("cancel_requested_at %v, want %v", got.CancelRequestedAt, req.CancelRequestedAt)
	}
	// Other endings record none.
	_, tr = f.running()
	f.finish(tr.RequestID, store.TurnFailed, protocol.Errorf(protocol.ModelFailure, "x"))
	if got := f.turn(tr.RequestID); got.CancelRequestedAt != nil {
		t.Fatalf("a failed turn has cancel_requested_at %v", got.CancelRequestedAt)
	}
}
