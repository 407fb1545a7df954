package coordinator_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/testutil"
)

// toggleScript proposes enabling the seeded nightly-audit schedule, then
// says "after" once the decision is known; "block" holds a worker until
// cancelled.
var toggleScript = script.Script{Turns: []script.Turn{
	{Match: "toggle", Steps: []script.Step{
		{Tool: ptr("set_schedule_enabled"), Arguments: jsontext.Value(`{"schedule":"nightly-audit","enabled":true}`)},
		{Text: ptr("after")},
	}},
	{Match: "block", Steps: []script.Step{{SleepMs: ptr(int64(600_000))}}},
	{Steps: []script.Step{{Text: ptr("ok")}}},
}}

// newToggled is an engine on toggleScript with a conversation whose turn
// waits on its proposal.
func newToggled(t *testing.T, o engineOpts) (*engine, string, protocol.TurnAccepted, protocol.CommandProposal) {
	t.Helper()
	o.script = &toggleScript
	e := newEngine(t, o)
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	return e, conv, acc, prop
}

// toggle submits "toggle" and waits for its proposal.
func (e *engine) toggle(conv string) (protocol.TurnAccepted, protocol.CommandProposal) {
	e.t.Helper()
	acc := e.submit(conv, "toggle")
	return acc, e.waitProposal(conv, acc.RequestID)
}

// checkOneEnding asserts what every race must leave behind: exactly one
// done; the proposal settled (never executing, never indeterminate on a
// healthy store); and a command that ran is audited confirmed+executed with
// its executed confirmation and tool_result before the done.
func (e *engine) checkOneEnding(convID, requestID string, prop protocol.CommandProposal) []protocol.Frame {
	e.t.Helper()
	frames := e.waitDone(convID, requestID)
	if n := countDone(e.frames(convID), requestID); n != 1 {
		e.t.Fatalf("%d done frames", n)
	}
	p := e.proposal(prop.ID)
	if p.Status == store.ProposalExecuting || slices.Contains(e.decisions(prop.ID), "indeterminate") {
		e.t.Fatalf("proposal %s with audit %v; frames %v", p.Status, e.decisions(prop.ID), kinds(frames))
	}
	if e.schedule().Enabled {
		if p.Status != store.ProposalSucceeded || !slices.Equal(e.decisions(prop.ID), []string{"confirmed", "executed"}) {
			e.t.Fatalf("the schedule changed but the proposal is %s with audit %v", p.Status, e.decisions(prop.ID))
		}
		k := kinds(frames)
		i := slices.Index(k, "confirmation:executed")
		if i < 0 || i+1 >= len(k) || k[i+1] != "tool_result" {
			e.t.Fatalf("executed command without its result frames: %v", k)
		}
	}
	return frames
}

// A cancel that checked for an executing proposal (none yet) and a confirm
// that then moved the proposal to executing. A cancel that ended the turn
// under the confirm would leave the executed command's result unrecorded:
// an indeterminate proposal on a healthy database.
func TestCancelRacingConfirmCheckThenConfirm(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})

	cancelChecked := e.store.Arm("ListProposals", func(arg any) bool {
		p := arg.(store.ListProposalsParams)
		return p.RequestID == acc.RequestID && slices.Equal(p.Statuses, []store.ProposalStatus{store.ProposalExecuting})
	})
	confirmed := e.store.Arm("ConfirmProposal:after", nil)
	cancelDone := goDo(func() { _, _ = e.coord.CancelTurn(e.ctx(), conv, acc.RequestID) })
	either(t, cancelChecked.Reached(), cancelDone)
	confirmDone := goDo(func() { _, _ = e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop)) })
	either(t, confirmed.Reached(), confirmDone)
	cancelChecked.Release()
	<-cancelDone
	confirmed.Release()
	<-confirmDone

	frames := e.checkOneEnding(conv, acc.RequestID, prop)
	if d := frames[len(frames)-1].Payload.(protocol.DonePayload); d.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("outcome %s, want cancelled: %v", d.Outcome, kinds(frames))
	}
}

// The other order: the confirm moved the proposal to executing, then the
// cancel came while the command executed. The cancel is answered at once;
// the command's result is recorded and shown, then the turn ends cancelled.
func TestCancelRacingConfirmConfirmThenCancel(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})

	confirmed := e.store.Arm("Execute", nil)
	var res protocol.ProposalResult
	var cerr error
	confirmDone := goDo(func() { res, cerr = e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop)) })
	either(t, confirmed.Reached(), confirmDone)
	var turn protocol.Turn
	var terr error
	cancelDone := goDo(func() { turn, terr = e.coord.CancelTurn(e.ctx(), conv, acc.RequestID) })
	// The cancel must not wait for the command: it answers while it runs.
	select {
	case <-cancelDone:
	case <-time.After(testutil.Patience):
		t.Fatal("cancel waited for the executing command")
	}
	// The true state: running (its command executes), not waiting for a human.
	if terr != nil || turn.Status != "running" || turn.CancelRequestedAt == nil {
		t.Fatalf("cancel during execution answered %+v %v", turn, terr)
	}
	confirmed.Release()
	<-confirmDone
	if cerr != nil || string(res.Status) != "succeeded" {
		t.Fatalf("confirm: %+v %v", res, cerr)
	}
	frames := e.checkOneEnding(conv, acc.RequestID, prop)
	if !e.schedule().Enabled {
		t.Fatal("the confirmed command did not run")
	}
	if d := frames[len(frames)-1].Payload.(protocol.DonePayload); d.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("outcome %s, want cancelled: %v", d.Outcome, kinds(frames))
	}
	// The turn's end says the command ran before the turn stopped.
	end, ok := frames[len(frames)-2].Payload.(protocol.ErrorPayload)
	if !ok || end.Error.Code != protocol.Cancelled || end.Error.Details["proposalId"] != prop.ID || !strings.Contains(end.Error.Message, "ran") {
		t.Fatalf("the end of a turn cancelled while its command ran: %v", kinds(frames))
	}
}

// The confirmed command's result resumed the turn, which waited for
// a worker (the only one was busy); a cancel then reached the waiting
// continuation, which must not be taken for a queued turn the store had
// already ended, leaving the turn running for ever.
func TestCancelOfContinuationWaitingForWorker(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{workers: 1})

	other := e.conversation()
	blocker := e.submit(other, "block")
	e.waitTurn(blocker.RequestID, func(t store.Turn) bool { return t.Status == store.TurnRunning })

	res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if err != nil || string(res.Status) != "succeeded" {
		t.Fatalf("confirm: %+v %v", res, err)
	}
	if _, err := e.coord.CancelTurn(e.ctx(), conv, acc.RequestID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.coord.CancelTurn(e.ctx(), other, blocker.RequestID); err != nil {
		t.Fatal(err)
	}
	frames := e.checkOneEnding(conv, acc.RequestID, prop)
	if d := frames[len(frames)-1].Payload.(protocol.DonePayload); d.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("outcome %s: %v", d.Outcome, kinds(frames))
	}
	e.waitDone(other, blocker.RequestID)
	// The conversation takes a new turn.
	next := e.submit(conv, "hello")
	e.waitDone(conv, next.RequestID)
}

// A deny that read the proposal pending, then lost to a confirm,
// answered 200 with the confirm's outcome; every loser must get the same
// 409 conflict naming the proposal's status.
func TestDenyLosingToConfirmIsConflict(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})

	read := e.store.Arm("GetProposal", func(arg any) bool { return arg.(string) == prop.ID })
	var denyErr error
	var denyRes protocol.ProposalResult
	denyDone := goDo(func() { denyRes, denyErr = e.coord.Deny(e.ctx(), conv, prop.ID) })
	either(t, read.Reached(), denyDone)
	res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	read.Release()
	<-denyDone
	if err != nil || string(res.Status) != "succeeded" {
		t.Fatalf("confirm: %+v %v", res, err)
	}
	if !protocol.IsCode(denyErr, protocol.Conflict) {
		t.Fatalf("losing deny answered %+v %v, want conflict", denyRes, denyErr)
	}
	if pe := protocol.ErrorOf(denyErr); pe.Details["status"] == nil {
		t.Fatalf("conflict without the proposal's status: %+v", pe)
	}
	// A deny after the confirm finished answers the same.
	_, err = e.coord.Deny(e.ctx(), conv, prop.ID)
	if !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("late deny: %v", err)
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
}

// A confirm that read the proposal pending, then lost the race to another
// confirm that executed it and let the owner finish the turn, answers the
// stored outcome — not "still pending; try again" from what it read (the
// flake of TestTwentyConcurrentConfirmsExecuteOnce under load).
func TestConfirmThatReadPendingBeforeAnotherWon(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})
	stale := e.proposal(prop.ID)
	if stale.Status != store.ProposalPending {
		t.Fatalf("proposal is %s before any decision", stale.Status)
	}
	if res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop)); err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("first confirm: %+v %v", res, err)
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
	testutil.Eventually(t, func() bool { return e.coord.Owners() == 0 }, "the owners to end")
	res, err := e.coord.ConfirmAsRead(e.ctx(), stale)
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm that read the proposal pending: %+v %v", res, err)
	}
}
