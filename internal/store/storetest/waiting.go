package storetest

import (
	"slices"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseWaiting checks turns sent while another runs (whenBusy enqueue
// and interrupt): they wait without frames, the end of the active turn
// makes the first one active in the same transaction, a cancelled one
// ends there without running, and every turn's frames stay contiguous,
// from its instruction to its one done.
func ExerciseWaiting(t *testing.T, open func(t *testing.T) store.Store) {
	run := func(name string, fn func(t *testing.T, f *fixture)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newFixture(t, open))
		})
	}
	run("EnqueueWaitsWithoutFrames", testWaitEnqueue)
	run("RejectIsTheDefault", testWaitRejectDefault)
	run("EndPromotesInOrder", testWaitPromote)
	run("InterruptGoesFirstAndCancels", testWaitInterrupt)
	run("CancelledEndsWhenItsPlaceComes", testWaitCancelled)
	run("Bounded", testWaitBounded)
	run("SeenNewestTurn", testWaitSeen)
	run("NeverStartedOrClaimedWhileWaiting", testWaitNotStarted)
	run("RecoverKeepsWaiting", testWaitRecover)
	run("CancelQueuedActivePromotes", testWaitCancelQueuedActive)
}

func (f *fixture) submitWhen(convID string, w protocol.WhenBusy) store.Turn {
	f.t.Helper()
	p := f.submitParams(convID, f.get(convID).LastSequence())
	p.WhenBusy = w
	tr, fr, err := f.s.SubmitTurn(f.ctx, p)
	if err != nil {
		f.t.Fatalf("SubmitTurn(%s): %v", w, err)
	}
	if tr.Waiting() != (fr.Sequence == 0) {
		f.t.Fatalf("waiting %v with first frame %+v", tr.Waiting(), fr)
	}
	return tr
}

func (f *fixture) waiting(convID string) []string {
	f.t.Helper()
	ts, err := f.s.ListWaitingTurns(f.ctx, convID)
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []string
	for _, t := range ts {
		ids = append(ids, t.RequestID)
	}
	return ids
}

// wantContiguous checks that each turn's frames are one run, from its
// instruction (the first frame) to its one done (the last), and returns
// the turns in the order they appear.
func (f *fixture) wantContiguous(convID string) []string {
	f.t.Helper()
	frames := f.frames(convID)
	var order []string
	for i := 0; i < len(frames); {
		j := i
		for j < len(frames) && frames[j].RequestID == frames[i].RequestID {
			j++
		}
		rid := frames[i].RequestID
		if slices.Contains(order, rid) {
			f.t.Fatalf("turn %s has frames in two places: %+v", rid, frames)
		}
		order = append(order, rid)
		if tp, ok := payloadOf(f.t, frames[i]).(protocol.TextPayload); !ok || tp.Role != protocol.RoleUser {
			f.t.Fatalf("turn %s starts with %s, want its instruction", rid, frames[i].Type)
		}
		for k := i; k < j-1; k++ {
			if frames[k].Type == protocol.FrameDone {
				f.t.Fatalf("turn %s has a done frame before its last", rid)
			}
		}
		if j < len(frames) && frames[j-1].Type != protocol.FrameDone {
			f.t.Fatalf("turn %s is followed by another before its done", rid)
		}
		i = j
	}
	return order
}

func testWaitEnqueue(t *testing.T, f *fixture) {
	c, active := f.running()
	before := f.frames(c.ID)
	a := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	b := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	if !a.Waiting() || a.Status != store.TurnQueued || a.Owner != "" || a.StartedAt != nil {
		t.Fatalf("enqueued turn = %+v, want queued, waiting, owned by none", a)
	}
	if got := f.waiting(c.ID); !slices.Equal(got, []string{a.RequestID, b.RequestID}) {
		t.Fatalf("waiting = %v, want %v in order", got, []string{a.RequestID, b.RequestID})
	}
	if got := f.frames(c.ID); len(got) != len(before) {
		t.Fatalf("an enqueued turn stored %d frames", len(got)-len(before))
	}
	if conv := f.get(c.ID); *conv.ActiveRequestID != active.RequestID {
		t.Fatalf("active = %s, want %s still", *conv.ActiveRequestID, active.RequestID)
	}
	// The active turn goes on appending: the waiting ones never interleave.
	f.append(c.ID, active.RequestID, text("still answering"))
	if f.turn(active.RequestID).CancelRequestedAt != nil {
		t.Fatal("an enqueue asked the active turn to cancel")
	}
}

func testWaitRejectDefault(t *testing.T, f *fixture) {
	c, active := f.running()
	for _, w := range []protocol.WhenBusy{"", protocol.WhenBusyReject} {
		before := f.get(c.ID)
		p := f.submitParams(c.ID, before.LastSequence())
		p.WhenBusy = w
		_, _, err := f.s.SubmitTurn(f.ctx, p)
		pe := wantCode(t, err, protocol.Conflict)
		if pe.Details["activeRequestId"] != active.RequestID {
			t.Fatalf("details = %v", pe.Details)
		}
		wantNoTrace(t, f, before, p.RequestID)
	}
}

func testWaitPromote(t *testing.T, f *fixture) {
	c, active := f.running()
	a := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	b := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	frames := f.finish(active.RequestID, store.TurnCompleted, nil)
	// The done frame, then the first waiting turn's instruction, in the
	// one transaction.
	if len(frames) != 1 || frames[0].Type != protocol.FrameDone {
		t.Fatalf("FinishTurn frames = %+v, want its done", frames)
	}
	conv := f.get(c.ID)
	if conv.ActiveRequestID == nil || *conv.ActiveRequestID != a.RequestID {
		t.Fatalf("active = %v, want the first waiting turn %s", conv.ActiveRequestID, a.RequestID)
	}
	ta := f.turn(a.RequestID)
	if ta.Waiting() || ta.Status != store.TurnQueued || ta.Owner != "" {
		t.Fatalf("promoted turn = %+v, want queued, owned by none, no longer waiting", ta)
	}
	all := f.frames(c.ID)
	last := all[len(all)-1]
	if last.RequestID != a.RequestID || last.Sequence != frames[0].Sequence+1 {
		t.Fatalf("last frame = %+v, want the promoted turn's instruction right after the done", last)
	}
	if got := payloadOf(t, last); got != (protocol.TextPayload{Content: a.Instruction, Format: "plain", Role: protocol.RoleUser}) {
		t.Fatalf("instruction frame = %#v", got)
	}
	if got := f.waiting(c.ID); !slices.Equal(got, []string{b.RequestID}) {
		t.Fatalf("waiting = %v, want the second", got)
	}
	// It is claimable (no owner), and runs like any turn.
	claimed, ok, err := f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: "i-2", Now: f.tick()})
	if err != nil || !ok || claimed.RequestID != a.RequestID {
		t.Fatalf("ClaimTurn = %+v %v %v, want the promoted turn", claimed, ok, err)
	}
	f.append(c.ID, a.RequestID, text("second answer"))
	f.finish(a.RequestID, store.TurnFailed, protocol.Errorf(protocol.ModelFailure, "boom"))
	if conv := f.get(c.ID); conv.ActiveRequestID == nil || *conv.ActiveRequestID != b.RequestID {
		t.Fatalf("active = %v, want %s after a failed turn too", conv.ActiveRequestID, b.RequestID)
	}
	f.finish(b.RequestID, store.TurnCompleted, nil)
	if conv := f.get(c.ID); conv.ActiveRequestID != nil {
		t.Fatalf("active = %v after the line emptied", *conv.ActiveRequestID)
	}
	if order := f.wantContiguous(c.ID); !slices.Equal(order, []string{active.RequestID, a.RequestID, b.RequestID}) {
		t.Fatalf("turns ran in order %v", order)
	}
}

func testWaitInterrupt(t *testing.T, f *fixture) {
	c, active := f.running()
	a := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	x := f.submitWhen(c.ID, protocol.WhenBusyInterrupt)
	if x.Interrupts != active.RequestID {
		t.Fatalf("interrupts = %q, want %s", x.Interrupts, active.RequestID)
	}
	if got := f.waiting(c.ID); !slices.Equal(got, []string{x.RequestID, a.RequestID}) {
		t.Fatalf("waiting = %v, want the interrupt first", got)
	}
	if f.turn(active.RequestID).CancelRequestedAt == nil {
		t.Fatal("the interrupt did not record the active turn's cancel")
	}
	// The active turn's owner ends it cancelled; its frames stay.
	f.append(c.ID, active.RequestID, text("cut short"))
	f.finish(active.RequestID, store.TurnCancelled, nil)
	if conv := f.get(c.ID); *conv.ActiveRequestID != x.RequestID {
		t.Fatalf("active = %s, want the interrupt", *conv.ActiveRequestID)
	}
	f.finish(x.RequestID, store.TurnCompleted, nil)
	f.finish(a.RequestID, store.TurnCompleted, nil)
	if order := f.wantContiguous(c.ID); !slices.Equal(order, []string{active.RequestID, x.RequestID, a.RequestID}) {
		t.Fatalf("turns ran in order %v", order)
	}
}

func testWaitCancelled(t *testing.T, f *fixture) {
	c, active := f.running()
	a := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	b := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	tr, frames, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: a.RequestID, Now: f.tick()})
	if err != nil || len(frames) != 0 || tr.Status != store.TurnQueued || tr.CancelRequestedAt == nil {
		t.Fatalf("cancel of a waiting turn = %+v %v %v, want it marked, no frame", tr, frames, err)
	}
	// Idempotent.
	if _, _, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: a.RequestID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	f.finish(active.RequestID, store.TurnCompleted, nil)
	ta := f.turn(a.RequestID)
	if ta.Status != store.TurnCancelled || ta.StartedAt != nil || ta.Waiting() {
		t.Fatalf("cancelled waiting turn = %+v, want cancelled, never started", ta)
	}
	if conv := f.get(c.ID); *conv.ActiveRequestID != b.RequestID {
		t.Fatalf("active = %s, want the next one %s", *conv.ActiveRequestID, b.RequestID)
	}
	all := f.frames(c.ID)
	var mine []store.Frame
	for _, fr := range all {
		if fr.RequestID == a.RequestID {
			mine = append(mine, fr)
		}
	}
	if len(mine) != 2 {
		t.Fatalf("cancelled waiting turn has %d frames, want its instruction and its done", len(mine))
	}
	wantDone(t, mine[1], protocol.OutcomeCancelled)
	f.finish(b.RequestID, store.TurnCompleted, nil)
	if order := f.wantContiguous(c.ID); !slices.Equal(order, []string{active.RequestID, a.RequestID, b.RequestID}) {
		t.Fatalf("order %v", order)
	}
}

func testWaitBounded(t *testing.T, f *fixture) {
	c, _ := f.running()
	for range protocol.MaxWaitingTurns {
		f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	}
	p := f.submitParams(c.ID, f.get(c.ID).LastSequence())
	p.WhenBusy = protocol.WhenBusyInterrupt
	_, _, err := f.s.SubmitTurn(f.ctx, p)
	pe := wantCode(t, err, protocol.Conflict)
	if pe.Details["limit"] != "waitingTurns" {
		t.Fatalf("details = %v, want limit waitingTurns", pe.Details)
	}
	if _, err := f.s.GetTurn(f.ctx, p.RequestID); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("a refused submission left a turn: %v", err)
	}
}

func testWaitSeen(t *testing.T, f *fixture) {
	c, active := f.running()
	first := f.frames(c.ID)[0].Sequence // the active turn's instruction
	f.append(c.ID, active.RequestID, text("a"), text("b"))
	last := f.get(c.ID).LastSequence()
	try := func(expected int64, w protocol.WhenBusy) error {
		p := f.submitParams(c.ID, expected)
		p.WhenBusy = w
		_, _, err := f.s.SubmitTurn(f.ctx, p)
		return err
	}
	// Seen the newest turn begin: its frames may still be coming.
	if err := try(first, protocol.WhenBusyEnqueue); err != nil {
		t.Fatalf("expected %d (the newest turn's first): %v", first, err)
	}
	if err := try(last, protocol.WhenBusyInterrupt); err != nil {
		t.Fatalf("expected %d (the last): %v", last, err)
	}
	pe := wantCode(t, try(last+1, protocol.WhenBusyEnqueue), protocol.StaleContext)
	if detailInt(t, pe, "actualLastSequence") != last {
		t.Fatalf("details = %v", pe.Details)
	}
	// Reject keeps the exact rule.
	wantCode(t, try(first, protocol.WhenBusyReject), protocol.Conflict)

	// Not seen the newest turn begin: stale.
	f.finish(active.RequestID, store.TurnCancelled, nil) // the interrupt's turn is active now
	newest := f.get(c.ID).LastSequence()                 // its instruction
	wantCode(t, try(newest-1, protocol.WhenBusyEnqueue), protocol.StaleContext)
	if err := try(newest, protocol.WhenBusyEnqueue); err != nil {
		t.Fatal(err)
	}
}

func testWaitNotStarted(t *testing.T, f *fixture) {
	c, active := f.running()
	a := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	if _, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: a.RequestID, Now: f.tick(), Instance: "i"}); !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("StartTurn of a waiting turn = %v, want conflict", err)
	}
	if _, ok, err := f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: "i-2", Now: f.tick()}); err != nil || ok {
		t.Fatalf("ClaimTurn claimed a waiting turn (%v, %v)", ok, err)
	}
	if _, _, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: a.RequestID, Status: store.TurnFailed, Now: f.tick()}); !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("FinishTurn of a waiting turn = %v, want conflict", err)
	}
	if _, err := f.s.AppendFrames(f.ctx, appendParams(c.ID, a.RequestID, f.tick(), text("x"))); !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("AppendFrames of a waiting turn = %v, want conflict", err)
	}
	f.finish(active.RequestID, store.TurnCompleted, nil)
	f.wantContiguous(c.ID)
}

func testWaitRecover(t *testing.T, f *fixture) {
	c, active := f.running()
	f.append(c.ID, active.RequestID, text("half"))
	a := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	recovered, err := f.s.RecoverTurns(f.ctx, store.RecoverTurnsParams{Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	if len(recovered) != 1 || recovered[0].RequestID != active.RequestID {
		t.Fatalf("recovered %+v, want the running turn alone", recovered)
	}
	// Its end made the waiting turn active: queued, owned by none, to be
	// claimed and run.
	if conv := f.get(c.ID); conv.ActiveRequestID == nil || *conv.ActiveRequestID != a.RequestID {
		t.Fatalf("active = %v, want %s", conv.ActiveRequestID, a.RequestID)
	}
	if ta := f.turn(a.RequestID); ta.Status != store.TurnQueued || ta.Owner != "" || ta.Waiting() {
		t.Fatalf("turn = %+v", ta)
	}
	claimed, ok, err := f.s.ClaimTurn(f.ctx, store.ClaimTurnParams{Instance: "i-3", Now: f.tick()})
	if err != nil || !ok || claimed.RequestID != a.RequestID {
		t.Fatalf("ClaimTurn = %+v %v %v", claimed, ok, err)
	}
}

func testWaitCancelQueuedActive(t *testing.T, f *fixture) {
	c := f.conversation()
	active, _ := f.submit(c.ID) // queued, not started
	a := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
	_, frames, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: active.RequestID, Now: f.tick()})
	if err != nil || len(frames) == 0 {
		t.Fatalf("RequestCancel = %v %v", frames, err)
	}
	if conv := f.get(c.ID); conv.ActiveRequestID == nil || *conv.ActiveRequestID != a.RequestID {
		t.Fatalf("active = %v, want %s", conv.ActiveRequestID, a.RequestID)
	}
	f.finish(a.RequestID, store.TurnCompleted, nil)
	f.wantContiguous(c.ID)
}
