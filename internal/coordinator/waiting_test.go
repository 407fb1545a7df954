package coordinator_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Turns sent while another runs (protocol.WhenBusy), end to end through
// the engine: each runs in order, after the one ahead of it, with exactly
// one done; an interrupt cancels the one ahead the usual way.

func (e *engine) submitWhen(convID, instruction string, w protocol.WhenBusy) protocol.TurnAccepted {
	e.t.Helper()
	acc, err := e.trySubmitWhen(convID, instruction, w, -1)
	if err != nil {
		e.t.Fatal(err)
	}
	return acc
}

// trySubmitWhen submits at expected (-1: the conversation's last sequence).
func (e *engine) trySubmitWhen(convID, instruction string, w protocol.WhenBusy, expected int64) (protocol.TurnAccepted, error) {
	if expected < 0 {
		c, err := e.db.GetConversation(e.ctx(), convID)
		if err != nil {
			return protocol.TurnAccepted{}, err
		}
		expected = c.LastSequence()
	}
	return e.coord.SubmitTurn(e.ctx(), convID, protocol.TurnRequest{Instruction: instruction, WhenBusy: w,
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &expected})
}

// turnOrder is the order in which the conversation's turns appear in its
// frames; each must be one run of frames with one done at its end.
func turnOrder(t testing.TB, frames []protocol.Frame) []string {
	t.Helper()
	var order []string
	for i := 0; i < len(frames); {
		j := i
		for j < len(frames) && frames[j].RequestID == frames[i].RequestID {
			j++
		}
		rid := frames[i].RequestID
		if slices.Contains(order, rid) {
			t.Fatalf("turn %s is split: %s", rid, describe(frames))
		}
		if n := countDone(frames[i:j], rid); n != 1 || frames[j-1].Type != protocol.FrameDone {
			t.Fatalf("turn %s has %d done frames, not at its end: %s", rid, n, describe(frames))
		}
		order = append(order, rid)
		i = j
	}
	return order
}

func TestWaitingTurnsRunInOrder(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: &toggleScript})
	conv := e.conversation()
	first := e.submit(conv, "block")
	e.waitTurn(first.RequestID, func(t store.Turn) bool { return t.Status == store.TurnRunning })
	a := e.submitWhen(conv, "first after", protocol.WhenBusyEnqueue)
	b := e.submitWhen(conv, "second after", protocol.WhenBusyEnqueue)
	if a.Waiting != 1 || b.Waiting != 2 || a.AcceptedSequence != 0 {
		t.Fatalf("accepted %+v and %+v, want places 1 and 2 and no frame yet", a, b)
	}
	p, err := e.coord.ActiveTurn(e.ctx(), conv)
	if err != nil || p == nil || len(p.Waiting) != 2 || p.Waiting[0].RequestID != a.RequestID || p.Waiting[1].Preview != "second after" {
		t.Fatalf("progress = %+v %v, want the line of two", p, err)
	}
	// The default still refuses.
	if _, err := e.trySubmit(conv, "now"); !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("a plain submission while busy = %v, want conflict", err)
	}
	if _, err := e.coord.CancelTurn(e.ctx(), conv, first.RequestID); err != nil {
		t.Fatal(err)
	}
	e.waitDone(conv, b.RequestID)
	frames := e.frames(conv)
	if order := turnOrder(t, frames); !slices.Equal(order, []string{first.RequestID, a.RequestID, b.RequestID}) {
		t.Fatalf("order %v", order)
	}
	for _, id := range []string{a.RequestID, b.RequestID} {
		if got := kinds(ofRequest(frames, id)); !slices.Equal(got, []string{"text", "text", "done:completed"}) {
			t.Fatalf("turn %s: %v", id, got)
		}
	}
	if p, _ := e.coord.ActiveTurn(e.ctx(), conv); p != nil {
		t.Fatalf("progress after the line ran = %+v", p)
	}
}

func TestInterruptCancelsTheRunningTurn(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: &toggleScript})
	conv := e.conversation()
	first := e.submit(conv, "block")
	e.waitTurn(first.RequestID, func(t store.Turn) bool { return t.Status == store.TurnRunning })
	later := e.submitWhen(conv, "later", protocol.WhenBusyEnqueue)
	x := e.submitWhen(conv, "instead", protocol.WhenBusyInterrupt)
	if x.Interrupted != first.RequestID || x.Waiting != 1 {
		t.Fatalf("interrupt accepted %+v, want first in line, interrupting %s", x, first.RequestID)
	}
	e.waitDone(conv, later.RequestID)
	frames := e.frames(conv)
	if order := turnOrder(t, frames); !slices.Equal(order, []string{first.RequestID, x.RequestID, later.RequestID}) {
		t.Fatalf("order %v", order)
	}
	if got := kinds(ofRequest(frames, first.RequestID)); got[len(got)-1] != "done:cancelled" {
		t.Fatalf("interrupted turn ended %v", got)
	}
}

// An interrupt of a turn parked on a proposal cancels the proposal with
// it (audited denied); a confirm that comes after answers cancelled and
// executes nothing.
func TestInterruptCancelsTheParkedProposal(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})
	x := e.submitWhen(conv, "instead", protocol.WhenBusyInterrupt)
	e.waitDone(conv, x.RequestID)
	res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultCancelled {
		t.Fatalf("confirm after the interrupt = %+v %v, want cancelled", res, err)
	}
	if e.schedule().Enabled {
		t.Fatal("the cancelled proposal executed")
	}
	frames := e.frames(conv)
	if order := turnOrder(t, frames); !slices.Equal(order, []string{acc.RequestID, x.RequestID}) {
		t.Fatalf("order %v", order)
	}
	if got := e.decisions(prop.ID); !slices.Contains(got, "denied") {
		t.Fatalf("audit %v, want the proposal denied with its turn", got)
	}
}

// A confirm racing an interrupt: whichever the owner takes first wins,
// the command runs at most once, and both turns end with one done each.
func TestInterruptRacesAConfirm(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})
	var res protocol.ProposalResult
	var cerr error
	confirmed := goDo(func() { res, cerr = e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop)) })
	x := e.submitWhen(conv, "instead", protocol.WhenBusyInterrupt)
	<-confirmed
	e.waitDone(conv, x.RequestID)
	if cerr != nil {
		t.Fatal(cerr)
	}
	ran := e.schedule().Enabled
	if ran != (res.Status == protocol.ResultSucceeded) {
		t.Fatalf("confirm answered %s but the command ran: %v", res.Status, ran)
	}
	if order := turnOrder(t, e.frames(conv)); !slices.Equal(order, []string{acc.RequestID, x.RequestID}) {
		t.Fatalf("order %v", order)
	}
}

// A waiting turn cancelled before its place comes never runs; it ends
// cancelled right after the turn ahead, and the next one runs.
func TestCancelledWaitingTurnNeverRuns(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: &toggleScript})
	conv := e.conversation()
	first := e.submit(conv, "block")
	e.waitTurn(first.RequestID, func(t store.Turn) bool { return t.Status == store.TurnRunning })
	a := e.submitWhen(conv, "toggle", protocol.WhenBusyEnqueue) // would propose
	b := e.submitWhen(conv, "plain", protocol.WhenBusyEnqueue)
	v, err := e.coord.CancelTurn(e.ctx(), conv, a.RequestID)
	if err != nil || v.Status != string(store.TurnQueued) || v.CancelRequestedAt == nil {
		t.Fatalf("cancel of a waiting turn = %+v %v", v, err)
	}
	if p, _ := e.coord.ActiveTurn(e.ctx(), conv); p == nil || len(p.Waiting) != 2 || !p.Waiting[0].CancelRequested {
		t.Fatalf("progress = %+v, want the cancelled turn marked", p)
	}
	if _, err := e.coord.CancelTurn(e.ctx(), conv, first.RequestID); err != nil {
		t.Fatal(err)
	}
	e.waitDone(conv, b.RequestID)
	frames := e.frames(conv)
	if got := kinds(ofRequest(frames, a.RequestID)); !slices.Equal(got, []string{"text", "done:cancelled"}) {
		t.Fatalf("cancelled waiting turn: %v", got)
	}
	if order := turnOrder(t, frames); !slices.Equal(order, []string{first.RequestID, a.RequestID, b.RequestID}) {
		t.Fatalf("order %v", order)
	}
	if ps, _ := e.db.ListProposals(e.ctx(), store.ListProposalsParams{RequestID: a.RequestID, Limit: 10}); len(ps) != 0 {
		t.Fatalf("the cancelled waiting turn proposed %d", len(ps))
	}
}

// A daemon restarted (alone with its database) with a turn waiting: the
// running one fails with service_restarted, the waiting one runs on the
// next start. (cmd/studio's process tests kill the daemon for real.)
func TestWaitingTurnSurvivesARestart(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: &toggleScript, tweak: func(c *coordinator.Config) { c.ShutdownGrace = time.Millisecond }})
	conv := e.conversation()
	first := e.submit(conv, "block")
	e.waitTurn(first.RequestID, func(t store.Turn) bool { return t.Status == store.TurnRunning })
	a := e.submitWhen(conv, "after the restart", protocol.WhenBusyEnqueue)

	// The daemon stops: the running turn fails, and its end makes the
	// waiting one active, for the next start to claim.
	e.coord.Shutdown(context.Background())

	cfg := e.cfg
	cfg.Instance = "next"
	next := coordinator.New(cfg)
	t.Cleanup(func() { next.Shutdown(context.Background()) })
	if err := next.Recover(e.ctx()); err != nil {
		t.Fatal(err)
	}
	e.waitDone(conv, a.RequestID)
	frames := e.frames(conv)
	if got := kinds(ofRequest(frames, first.RequestID)); got[len(got)-1] != "done:failed" {
		t.Fatalf("interrupted turn: %v", got)
	}
	if got := kinds(ofRequest(frames, a.RequestID)); got[len(got)-1] != "done:completed" {
		t.Fatalf("waiting turn after the restart: %v", got)
	}
	turnOrder(t, frames)
}
