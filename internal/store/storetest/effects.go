package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseEffects runs the conformance suite of store.EffectStore: an effect
// and its ui_command frame commit together and only for the active request,
// and acknowledgements move a pending effect once, answer an identical repeat
// unchanged and refuse a contradictory one. Like Exercise, open must return
// a fresh, migrated store closed in t.Cleanup.
func ExerciseEffects(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := subtests(t, open)
	run("Emit", testEffectEmit)
	run("EmitEveryKind", testEffectEmitKinds)
	run("EmitOnlyActiveRequest", testEffectEmitNotActive)
	run("EmitInvalidLeavesNothing", testEffectEmitInvalid)
	run("EmitDuplicateID", testEffectEmitDuplicate)
	run("GetMissing", testEffectGetMissing)
	run("Ack/Applied", testEffectAckApplied)
	run("Ack/Rejected", testEffectAckRejected)
	run("Ack/Expired", testEffectAckExpired)
	run("Ack/InvalidStatus", testEffectAckInvalidStatus)
	run("Ack/Missing", testEffectAckMissing)
	run("Ack/Concurrent", testEffectAckConcurrent)
}

// sampleEffect is a navigate effect whose params hold each value type a
// param may have.
func sampleEffect() protocol.Effect {
	return protocol.Effect{Kind: protocol.EffectNavigate, Space: "history",
		Params: map[string]any{"status": "failed", "page": 2, "pinned": true, "tags": []string{"nightly", "repo"}}}
}

func (f *fixture) emitParams(convID, requestID string, eff protocol.Effect) store.EmitEffectParams {
	now := f.tick()
	return store.EmitEffectParams{ID: newID(), ConversationID: convID, RequestID: requestID, Effect: eff,
		ExpiresAt: now.Add(2 * time.Minute), Now: now}
}

// emit emits sampleEffect for the active request.
func (f *fixture) emit(convID, requestID string) store.Effect {
	f.t.Helper()
	e, _, err := f.s.EmitEffect(f.ctx, f.emitParams(convID, requestID, sampleEffect()))
	if err != nil {
		f.t.Fatalf("EmitEffect: %v", err)
	}
	return e
}

func (f *fixture) effect(id string) store.Effect {
	f.t.Helper()
	e, err := f.s.GetEffect(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetEffect(%s): %v", id, err)
	}
	return e
}

// sameEffect compares effects by their canonical JSON: a backend decodes a
// stored integer param as it likes (2 or 2.0).
func sameEffect(t *testing.T, got, want protocol.Effect) bool {
	t.Helper()
	g, err := protocol.Marshal(got)
	if err != nil {
		t.Fatalf("marshal effect %+v: %v", got, err)
	}
	w, err := protocol.Marshal(want)
	if err != nil {
		t.Fatalf("marshal effect %+v: %v", want, err)
	}
	return jsonEqual(t, g, w)
}

// wantEffectRow checks an effect against what emitted it and its
// acknowledgement fields.
func wantEffectRow(t *testing.T, e store.Effect, p store.EmitEffectParams, status store.EffectStatus, ackedAt *time.Time, route, code *string) {
	t.Helper()
	if e.ID != p.ID || e.ConversationID != p.ConversationID || e.RequestID != p.RequestID || e.Type != p.Effect.Kind ||
		!e.EmittedAt.Equal(p.Now) || !e.ExpiresAt.Equal(p.ExpiresAt) {
		t.Fatalf("effect = %+v, emitted with %+v", e, p)
	}
	if !sameEffect(t, e.Effect, p.Effect) {
		t.Fatalf("effect body = %+v, want %+v", e.Effect, p.Effect)
	}
	if e.Status != status || !sameTime(e.AcknowledgedAt, ackedAt) ||
		!slices.Equal(ptrSlice(e.ClientRoute), ptrSlice(route)) || !slices.Equal(ptrSlice(e.RejectionCode), ptrSlice(code)) {
		t.Fatalf("effect state = %s acked %v route %v code %v, want %s acked %v route %v code %v",
			e.Status, e.AcknowledgedAt, ptrSlice(e.ClientRoute), ptrSlice(e.RejectionCode), status, ackedAt, ptrSlice(route), ptrSlice(code))
	}
}

func testEffectEmit(t *testing.T, f *fixture) {
	c, tr := f.running()
	sig := f.s.FrameSignal(c.ID)
	p := f.emitParams(c.ID, tr.RequestID, sampleEffect())
	e, fr, err := f.s.EmitEffect(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig, "EmitEffect")
	wantEffectRow(t, e, p, store.EffectPending, nil, nil, nil)
	wantEffectRow(t, f.effect(p.ID), p, store.EffectPending, nil, nil, nil)

	// The ui_command frame carries {effectId, effect, expiresAt}.
	if fr.ConversationID != c.ID || fr.RequestID != tr.RequestID || fr.Sequence != c.NextSequence ||
		fr.Type != protocol.FrameUICommand || !fr.CreatedAt.Equal(p.Now) {
		t.Fatalf("ui_command frame = %+v", fr)
	}
	want := mustEncode(t, protocol.UICommandPayload{EffectID: p.ID, Effect: p.Effect, ExpiresAt: protocol.Timestamp(p.ExpiresAt)})
	if !jsonEqual(t, fr.Payload, want) {
		t.Fatalf("ui_command payload = %s, want %s", fr.Payload, want)
	}
	ui, ok := payloadOf(t, fr).(protocol.UICommandPayload)
	if !ok || ui.EffectID != p.ID || ui.ExpiresAt != protocol.Timestamp(p.ExpiresAt) || !sameEffect(t, ui.Effect, p.Effect) {
		t.Fatalf("ui_command payload decodes to %#v", payloadOf(t, fr))
	}
	stored := f.frames(c.ID)
	if len(stored) != 2 || stored[1].Sequence != fr.Sequence || stored[1].Type != protocol.FrameUICommand ||
		!jsonEqual(t, stored[1].Payload, want) || !stored[1].CreatedAt.Equal(p.Now) {
		t.Fatalf("stored frames = %+v, want the user frame and the ui_command", stored)
	}
	if g := f.get(c.ID); g.NextSequence != c.NextSequence+1 {
		t.Fatalf("next_sequence = %d, want %d", g.NextSequence, c.NextSequence+1)
	}

	// The next effect's frame follows, after any other frame of the turn.
	f.append(c.ID, tr.RequestID, text("between"))
	_, fr2, err := f.s.EmitEffect(f.ctx, f.emitParams(c.ID, tr.RequestID, sampleEffect()))
	if err != nil {
		t.Fatal(err)
	}
	if fr2.Sequence != fr.Sequence+2 {
		t.Fatalf("second ui_command has sequence %d, want %d", fr2.Sequence, fr.Sequence+2)
	}
}

func testEffectEmitKinds(t *testing.T, f *fixture) {
	c, tr := f.running()
	for _, eff := range []protocol.Effect{
		sampleEffect(),
		{Kind: protocol.EffectNavigate, Space: "mission"}, // no params: {} on the wire
		{Kind: protocol.EffectSelect, Space: "library", Selection: map[string]string{"playbookId": "pb-1"}},
		{Kind: protocol.EffectPrefill, Form: "schedule", Values: map[string]any{"cron": "0 * * * *", "enabled": true, "retries": 3}},
		{Kind: protocol.EffectTheme, Theme: "dark"},
	} {
		p := f.emitParams(c.ID, tr.RequestID, eff)
		e, fr, err := f.s.EmitEffect(f.ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", eff.Kind, err)
		}
		wantEffectRow(t, e, p, store.EffectPending, nil, nil, nil)
		wantEffectRow(t, f.effect(p.ID), p, store.EffectPending, nil, nil, nil)
		want := mustEncode(t, protocol.UICommandPayload{EffectID: p.ID, Effect: eff, ExpiresAt: protocol.Timestamp(p.ExpiresAt)})
		if !jsonEqual(t, fr.Payload, want) {
			t.Fatalf("%s: ui_command payload = %s, want %s", eff.Kind, fr.Payload, want)
		}
	}
}

// wantNoEffect checks that a refused emission left no effect row and no frame.
func wantNoEffect(t *testing.T, f *fixture, before store.Conversation, id string) {
	t.Helper()
	_, err := f.s.GetEffect(f.ctx, id)
	wantCode(t, err, protocol.NotFound)
	after := f.get(before.ID)
	if after.NextSequence != before.NextSequence {
		t.Fatalf("refused emission moved next_sequence %d -> %d", before.NextSequence, after.NextSequence)
	}
	if n := int64(len(f.frames(before.ID))); n != before.LastSequence() {
		t.Fatalf("refused emission left %d frames, want %d", n, before.LastSequence())
	}
}

func testEffectEmitNotActive(t *testing.T, f *fixture) {
	c, tr := f.running()
	_, otherTurn := f.running()
	before := f.get(c.ID)
	for name, reqID := range map[string]string{
		"an unknown request":                 newID(),
		"another conversation's active turn": otherTurn.RequestID,
	} {
		p := f.emitParams(c.ID, reqID, sampleEffect())
		_, _, err := f.s.EmitEffect(f.ctx, p)
		if !protocol.IsCode(err, protocol.Conflict) {
			t.Fatalf("emit by %s: err = %v, want conflict", name, err)
		}
		wantNoEffect(t, f, before, p.ID)
	}

	// A queued turn is active: it may emit.
	q := f.conversation()
	qt, _ := f.submit(q.ID)
	f.emit(q.ID, qt.RequestID)

	// The turn has ended: the conversation has no active request.
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before = f.get(c.ID)
	p := f.emitParams(c.ID, tr.RequestID, sampleEffect())
	_, _, err := f.s.EmitEffect(f.ctx, p)
	wantCode(t, err, protocol.Conflict)
	wantNoEffect(t, f, before, p.ID)

	// A newer turn is active: the old request still may not emit.
	f.submit(c.ID)
	before = f.get(c.ID)
	p = f.emitParams(c.ID, tr.RequestID, sampleEffect())
	_, _, err = f.s.EmitEffect(f.ctx, p)
	wantCode(t, err, protocol.Conflict)
	wantNoEffect(t, f, before, p.ID)

	p = f.emitParams(newID(), tr.RequestID, sampleEffect())
	_, _, err = f.s.EmitEffect(f.ctx, p)
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.GetEffect(f.ctx, p.ID)
	wantCode(t, err, protocol.NotFound)
}

// testEffectEmitInvalid: an effect its ui_command frame cannot carry is the
// caller's validation error, and neither the row nor the frame stays.
func testEffectEmitInvalid(t *testing.T, f *fixture) {
	c, tr := f.running()
	before := f.get(c.ID)
	for _, eff := range []protocol.Effect{
		{Kind: protocol.EffectNavigate, Space: "nowhere"},
		{Kind: protocol.EffectNavigate, Space: "history", Theme: "dark"},
		{Kind: protocol.EffectSelect, Space: "system", Selection: map[string]string{"x": "y"}},
		{Kind: protocol.EffectTheme, Theme: "sepia"},
		{Kind: "teleport"},
	} {
		p := f.emitParams(c.ID, tr.RequestID, eff)
		_, _, err := f.s.EmitEffect(f.ctx, p)
		if !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("emit %+v: err = %v, want validation", eff, err)
		}
		wantNoEffect(t, f, before, p.ID)
	}
}

func testEffectEmitDuplicate(t *testing.T, f *fixture) {
	c, tr := f.running()
	first := f.emitParams(c.ID, tr.RequestID, sampleEffect())
	if _, _, err := f.s.EmitEffect(f.ctx, first); err != nil {
		t.Fatal(err)
	}
	before := f.get(c.ID)
	again := f.emitParams(c.ID, tr.RequestID, protocol.Effect{Kind: protocol.EffectTheme, Theme: "light"})
	again.ID = first.ID
	if _, _, err := f.s.EmitEffect(f.ctx, again); err == nil {
		t.Fatal("an effect with an existing id was emitted")
	}
	if after := f.get(c.ID); after.NextSequence != before.NextSequence {
		t.Fatalf("refused emission appended a frame: next_sequence %d -> %d", before.NextSequence, after.NextSequence)
	}
	wantEffectRow(t, f.effect(first.ID), first, store.EffectPending, nil, nil, nil)
}

func testEffectGetMissing(t *testing.T, f *fixture) {
	_, err := f.s.GetEffect(f.ctx, newID())
	wantCode(t, err, protocol.NotFound)
}

// ack acknowledges and fails on error.
func (f *fixture) ack(p store.AckEffectParams) store.Effect {
	f.t.Helper()
	e, err := f.s.AckEffect(f.ctx, p)
	if err != nil {
		f.t.Fatalf("AckEffect(%+v): %v", p, err)
	}
	return e
}

// wantRefusedAck checks that each acknowledgement is refused with code
// (details.status naming the stored state) and changes nothing.
func wantRefusedAck(t *testing.T, f *fixture, stored store.Effect, code protocol.ErrorCode, acks ...store.AckEffectParams) {
	t.Helper()
	for _, p := range acks {
		_, err := f.s.AckEffect(f.ctx, p)
		if !protocol.IsCode(err, code) {
			t.Fatalf("AckEffect(%s route %v code %v) on a %s effect: err = %v, want %s",
				p.Status, ptrSlice(p.ClientRoute), ptrSlice(p.RejectionCode), stored.Status, err, code)
		}
		if pe := protocol.ErrorOf(err); pe.Details["status"] != string(stored.Status) {
			t.Fatalf("refused ack details = %v, want status %s", pe.Details, stored.Status)
		}
		if got := f.effect(stored.ID); got.Status != stored.Status || !sameTime(got.AcknowledgedAt, stored.AcknowledgedAt) ||
			!slices.Equal(ptrSlice(got.ClientRoute), ptrSlice(stored.ClientRoute)) ||
			!slices.Equal(ptrSlice(got.RejectionCode), ptrSlice(stored.RejectionCode)) {
			t.Fatalf("refused ack changed the effect: %+v -> %+v", stored, got)
		}
	}
}

func testEffectAckApplied(t *testing.T, f *fixture) {
	c, tr := f.running()
	p := f.emitParams(c.ID, tr.RequestID, sampleEffect())
	if _, _, err := f.s.EmitEffect(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	route := "/history?status=failed"
	now := f.tick()
	ack := store.AckEffectParams{ID: p.ID, Status: store.EffectApplied, ClientRoute: ptr(route), Now: now}
	got := f.ack(ack)
	wantEffectRow(t, got, p, store.EffectApplied, &now, &route, nil)
	stored := f.effect(p.ID)
	wantEffectRow(t, stored, p, store.EffectApplied, &now, &route, nil)

	// An identical repeat, later, answers the stored acknowledgement.
	again := ack
	again.Now = f.tick()
	wantEffectRow(t, f.ack(again), p, store.EffectApplied, &now, &route, nil)
	wantEffectRow(t, f.effect(p.ID), p, store.EffectApplied, &now, &route, nil)

	// A contradictory one is conflict.
	wantRefusedAck(t, f, stored, protocol.Conflict,
		store.AckEffectParams{ID: p.ID, Status: store.EffectApplied, ClientRoute: ptr("/history"), Now: f.tick()},
		store.AckEffectParams{ID: p.ID, Status: store.EffectApplied, Now: f.tick()},
		store.AckEffectParams{ID: p.ID, Status: store.EffectApplied, ClientRoute: ptr(route), RejectionCode: ptr("client_error"), Now: f.tick()},
		store.AckEffectParams{ID: p.ID, Status: store.EffectRejected, RejectionCode: ptr("not_visible"), Now: f.tick()},
		store.AckEffectParams{ID: p.ID, Status: store.EffectExpired, Now: f.tick()},
	)
	// Acknowledging writes no frame.
	if n := len(f.frames(c.ID)); n != 2 {
		t.Fatalf("%d frames after acknowledgements, want 2", n)
	}
}

func testEffectAckRejected(t *testing.T, f *fixture) {
	c, tr := f.running()
	p := f.emitParams(c.ID, tr.RequestID, sampleEffect())
	if _, _, err := f.s.EmitEffect(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	code := "not_visible"
	now := f.tick()
	ack := store.AckEffectParams{ID: p.ID, Status: store.EffectRejected, RejectionCode: ptr(code), Now: now}
	wantEffectRow(t, f.ack(ack), p, store.EffectRejected, &now, nil, &code)
	stored := f.effect(p.ID)
	wantEffectRow(t, stored, p, store.EffectRejected, &now, nil, &code)

	again := ack
	again.Now = f.tick()
	wantEffectRow(t, f.ack(again), p, store.EffectRejected, &now, nil, &code)

	wantRefusedAck(t, f, stored, protocol.Conflict,
		store.AckEffectParams{ID: p.ID, Status: store.EffectRejected, RejectionCode: ptr("unsupported"), Now: f.tick()},
		store.AckEffectParams{ID: p.ID, Status: store.EffectRejected, Now: f.tick()},
		store.AckEffectParams{ID: p.ID, Status: store.EffectApplied, ClientRoute: ptr("/history"), Now: f.tick()},
		store.AckEffectParams{ID: p.ID, Status: store.EffectExpired, Now: f.tick()},
	)
}

func testEffectAckExpired(t *testing.T, f *fixture) {
	c, tr := f.running()
	p := f.emitParams(c.ID, tr.RequestID, sampleEffect())
	if _, _, err := f.s.EmitEffect(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	got := f.ack(store.AckEffectParams{ID: p.ID, Status: store.EffectExpired, Now: f.tick()})
	if got.Status != store.EffectExpired || got.ClientRoute != nil || got.RejectionCode != nil {
		t.Fatalf("expired effect = %+v", got)
	}
	stored := f.effect(p.ID)
	if stored.Status != store.EffectExpired || !sameTime(stored.AcknowledgedAt, got.AcknowledgedAt) {
		t.Fatalf("stored expired effect = %+v, returned %+v", stored, got)
	}
	// Expiring again is quiet and changes nothing.
	again := f.ack(store.AckEffectParams{ID: p.ID, Status: store.EffectExpired, Now: f.tick()})
	if again.Status != store.EffectExpired || !sameTime(again.AcknowledgedAt, stored.AcknowledgedAt) {
		t.Fatalf("second expiry = %+v, stored %+v", again, stored)
	}
	// Acknowledging an expired effect is stale_context.
	wantRefusedAck(t, f, stored, protocol.StaleContext,
		store.AckEffectParams{ID: p.ID, Status: store.EffectApplied, ClientRoute: ptr("/history?status=failed"), Now: f.tick()},
		store.AckEffectParams{ID: p.ID, Status: store.EffectRejected, RejectionCode: ptr("not_visible"), Now: f.tick()},
	)
}

// testEffectAckInvalidStatus: an acknowledgement moves a pending effect to
// applied, rejected or expired; anything else is the caller's validation
// error and leaves the effect pending.
func testEffectAckInvalidStatus(t *testing.T, f *fixture) {
	c, tr := f.running()
	e := f.emit(c.ID, tr.RequestID)
	for _, st := range []store.EffectStatus{store.EffectPending, "", "dismissed"} {
		_, err := f.s.AckEffect(f.ctx, store.AckEffectParams{ID: e.ID, Status: st, ClientRoute: ptr("/"), Now: f.tick()})
		if !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("AckEffect(status %q): err = %v, want validation", st, err)
		}
		if got := f.effect(e.ID); got.Status != store.EffectPending || got.AcknowledgedAt != nil || got.ClientRoute != nil {
			t.Fatalf("AckEffect(status %q) changed the effect: %+v", st, got)
		}
	}
}

func testEffectAckMissing(t *testing.T, f *fixture) {
	_, err := f.s.AckEffect(f.ctx, store.AckEffectParams{ID: newID(), Status: store.EffectApplied, ClientRoute: ptr("/"), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

// testEffectAckConcurrent: clients acknowledge one effect at once, half
// applied and half rejected. The first stored acknowledgement wins; every
// one identical to it succeeds and every other is conflict.
func testEffectAckConcurrent(t *testing.T, f *fixture) {
	c, tr := f.running()
	for round := range 5 {
		e := f.emit(c.ID, tr.RequestID)
		now := f.tick()
		acks := []store.AckEffectParams{
			{ID: e.ID, Status: store.EffectApplied, ClientRoute: ptr("/history?status=failed"), Now: now},
			{ID: e.ID, Status: store.EffectRejected, RejectionCode: ptr("not_visible"), Now: now},
		}
		const n = 10
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = f.s.AckEffect(f.ctx, acks[i%2]) })
		}
		wg.Wait()
		stored := f.effect(e.ID)
		if stored.Status != store.EffectApplied && stored.Status != store.EffectRejected {
			t.Fatalf("round %d: stored status %s", round, stored.Status)
		}
		for i, err := range errs {
			won := acks[i%2].Status == stored.Status
			switch {
			case won && err != nil:
				t.Fatalf("round %d: an ack identical to the stored %s failed: %v", round, stored.Status, err)
			case !won && !protocol.IsCode(err, protocol.Conflict):
				t.Fatalf("round %d: an ack contradicting the stored %s: err = %v, want conflict", round, stored.Status, err)
			}
		}
	}
}
