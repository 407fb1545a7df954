package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseProposals runs the conformance suite of store.ProposalStore: a
// proposal and its frames commit together and only for the active request;
// every transition appends its audit row, its frames and any turn transition
// in one transaction, or changes nothing; a proposal leaves pending once.
// Like Exercise, open must return a fresh, migrated store closed in
// t.Cleanup.
func ExerciseProposals(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := subtests(t, open)
	run("Create", testProposalCreate)
	run("CreateOnlyActiveRequest", testProposalCreateNotActive)
	run("CreateInvalidLeavesNothing", testProposalCreateInvalid)
	run("GetMissing", testProposalGetMissing)
	run("List", testProposalList)
	run("Confirm", testProposalConfirm)
	run("Confirm/Concurrent", testProposalConfirmConcurrent)
	run("Confirm/RacesClose", testProposalConfirmRacesClose)
	run("Finish/SucceededResumes", testProposalFinishSucceeded)
	run("Finish/FailedWhileRunning", testProposalFinishFailed)
	run("Finish/Refused", testProposalFinishRefused)
	run("Close", testProposalClose)
	run("Close/Refused", testProposalCloseRefused)
	run("AwaitConfirmation", testAwaitConfirmation)
	run("Atomicity/TurnEnded", testProposalTurnEnded)
	run("Atomicity/InvalidFrames", testProposalInvalidFrames)
}

// proposalCommand is canonical JSON, as the coordinator stores commands.
const proposalCommand = `{"args":{"a":"1","b":"2"},"playbook":"audit-repo"}`

// newProposal is a proposal for the request, not yet stored.
func (f *fixture) newProposal(convID, requestID string) store.Proposal {
	f.t.Helper()
	hash, err := protocol.CommandHash([]byte(proposalCommand))
	if err != nil {
		f.t.Fatal(err)
	}
	return store.Proposal{ID: newID(), ConversationID: convID, RequestID: requestID, CallID: "call_" + newID(),
		CommandType: "launch_playbook", Command: jsontext.Value(proposalCommand), CommandHash: hash,
		Target: &protocol.ResourceVersion{Kind: "playbook", ID: "pb-1", Version: "3"}, Risk: protocol.RiskExecute,
		Summary: "Launch audit-repo on repo x", IdempotencyKey: newID(), ExpiresAt: f.clock.Now().Add(10 * time.Minute)}
}

// propose stores a new proposal for the request.
func (f *fixture) propose(convID, requestID string) store.Proposal {
	f.t.Helper()
	p, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: f.newProposal(convID, requestID), Now: f.tick()})
	if err != nil {
		f.t.Fatalf("CreateProposal: %v", err)
	}
	return p
}

func (f *fixture) proposal(id string) store.Proposal {
	f.t.Helper()
	p, err := f.s.GetProposal(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetProposal(%s): %v", id, err)
	}
	return p
}

// proposalAudit is the audit row of a proposal's transition.
func proposalAudit(id string, decision protocol.Decision, now time.Time) store.AppendAdminEventParams {
	return store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AuditAction, TargetID: ptr(id),
		Details: jsontext.Value(fmt.Sprintf(`{"proposalId":%q, "decision":%q}`, id, decision)), Now: now}
}

// appAudit is a second row of the same transition (FinishProposalParams.Also).
func appAudit(id string, now time.Time) *store.AppendAdminEventParams {
	return &store.AppendAdminEventParams{Actor: "studio_cockpit", Action: "studio.app.command", TargetID: ptr(id),
		Details: jsontext.Value(`{"commandType":"reconcile_proposal"}`), Now: now}
}

func confirmation(id string, state protocol.ConfirmationState) store.NewFrame {
	return store.NewFrame{Payload: protocol.ConfirmationPayload{ProposalID: id, State: state}}
}

// confirm moves a pending proposal to executing.
func (f *fixture) confirm(p store.Proposal) store.Proposal {
	f.t.Helper()
	now := f.tick()
	got, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: p.ID, Now: now,
		Audit: proposalAudit(p.ID, protocol.DecisionConfirmed, now), Frames: []store.NewFrame{confirmation(p.ID, protocol.ConfirmationConfirmed)}})
	if err != nil {
		f.t.Fatalf("ConfirmProposal: %v", err)
	}
	return got
}

// park parks the turn and fails unless it parked as want says.
func (f *fixture) park(requestID string, want bool) {
	f.t.Helper()
	parked, err := f.s.AwaitConfirmation(f.ctx, store.AwaitConfirmationParams{RequestID: requestID})
	if err != nil {
		f.t.Fatalf("AwaitConfirmation: %v", err)
	}
	if parked != want {
		f.t.Fatalf("AwaitConfirmation parked = %v, want %v (turn %s)", parked, want, f.turn(requestID).Status)
	}
}

// audits lists the audit rows of a target, newest first.
func (f *fixture) audits(targetID string) []store.AdminEvent {
	f.t.Helper()
	es, err := f.s.ListAdminEvents(f.ctx, store.ListAdminEventsParams{TargetID: targetID, Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return es
}

func (f *fixture) auditCount() int {
	f.t.Helper()
	es, err := f.s.ListAdminEvents(f.ctx, store.ListAdminEventsParams{Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(es)
}

// wantAudit checks a stored audit row against what appended it.
func wantAudit(t *testing.T, e store.AdminEvent, want store.AppendAdminEventParams) {
	t.Helper()
	if e.Actor != want.Actor || e.Action != want.Action || !slices.Equal(ptrSlice(e.TargetID), ptrSlice(want.TargetID)) ||
		!e.CreatedAt.Equal(want.Now) || !jsonEqual(t, e.Details, want.Details) {
		t.Fatalf("audit row = %+v (details %s), want %+v (details %s)", e, e.Details, want, want.Details)
	}
}

// wantProposal checks what a proposal was created with.
func wantProposal(t *testing.T, got, want store.Proposal, created time.Time) {
	t.Helper()
	if got.ID != want.ID || got.ConversationID != want.ConversationID || got.RequestID != want.RequestID ||
		got.CallID != want.CallID || got.CommandType != want.CommandType || got.CommandHash != want.CommandHash ||
		got.Risk != want.Risk || got.Summary != want.Summary || got.IdempotencyKey != want.IdempotencyKey ||
		!got.ExpiresAt.Equal(want.ExpiresAt) || !got.CreatedAt.Equal(created) {
		t.Fatalf("proposal = %+v, want %+v created at %v", got, want, created)
	}
	if (got.Target == nil) != (want.Target == nil) || (got.Target != nil && *got.Target != *want.Target) {
		t.Fatalf("proposal target = %+v, want %+v", got.Target, want.Target)
	}
	if !jsonEqual(t, got.Command, want.Command) {
		t.Fatalf("proposal command = %s, want %s", got.Command, want.Command)
	}
}

// wantProposalState checks a proposal's state fields; result nil means none.
func wantProposalState(t *testing.T, p store.Proposal, status store.ProposalStatus, confirmed, completed *time.Time, result []byte, code *string) {
	t.Helper()
	if p.Status != status || !sameTime(p.ConfirmedAt, confirmed) || !sameTime(p.CompletedAt, completed) ||
		!slices.Equal(ptrSlice(p.ErrorCode), ptrSlice(code)) {
		t.Fatalf("proposal state = %s confirmed %v completed %v code %v, want %s confirmed %v completed %v code %v",
			p.Status, p.ConfirmedAt, p.CompletedAt, ptrSlice(p.ErrorCode), status, confirmed, completed, ptrSlice(code))
	}
	if result == nil {
		if len(p.Result) != 0 {
			t.Fatalf("proposal result = %s, want none", p.Result)
		}
	} else if !jsonEqual(t, p.Result, result) {
		t.Fatalf("proposal result = %s, want %s", p.Result, result)
	}
}

// wantTail checks that the conversation's frames after sequence from are
// exactly payloads, of the request, created at now.
func wantTail(t *testing.T, f *fixture, convID, requestID string, from int64, now time.Time, payloads ...protocol.Payload) {
	t.Helper()
	all := f.frames(convID)
	var tail []store.Frame
	for _, fr := range all {
		if fr.Sequence > from {
			tail = append(tail, fr)
		}
	}
	if len(tail) != len(payloads) {
		t.Fatalf("%d frames after sequence %d, want %d: %+v", len(tail), from, len(payloads), tail)
	}
	wantSequences(t, tail, from+1)
	for i, fr := range tail {
		want := mustEncode(t, payloads[i])
		if fr.Type != payloads[i].FrameType() || fr.RequestID != requestID || !fr.CreatedAt.Equal(now) || !jsonEqual(t, fr.Payload, want) {
			t.Fatalf("frame %d = %+v (payload %s), want %s %s of %s at %v", fr.Sequence, fr, fr.Payload, payloads[i].FrameType(), want, requestID, now)
		}
	}
	if g := f.get(convID); g.NextSequence != from+int64(len(payloads))+1 {
		t.Fatalf("next_sequence = %d, want %d", g.NextSequence, from+int64(len(payloads))+1)
	}
}

func payloads(frames []store.NewFrame) []protocol.Payload {
	out := make([]protocol.Payload, len(frames))
	for i, fr := range frames {
		out[i] = fr.Payload
	}
	return out
}

// snapshot is what a refused transition must leave as it was.
type snapshot struct {
	proposal     store.Proposal
	audits       int
	allAudits    int
	nextSequence int64
	turn         store.TurnStatus
}

func (f *fixture) snapshot(id string) snapshot {
	f.t.Helper()
	p := f.proposal(id)
	return snapshot{proposal: p, audits: len(f.audits(id)), allAudits: f.auditCount(),
		nextSequence: f.get(p.ConversationID).NextSequence, turn: f.turn(p.RequestID).Status}
}

func wantUnchanged(t *testing.T, f *fixture, before snapshot, what string) {
	t.Helper()
	after := f.snapshot(before.proposal.ID)
	b, a := before.proposal, after.proposal
	if a.Status != b.Status || !sameTime(a.ConfirmedAt, b.ConfirmedAt) || !sameTime(a.CompletedAt, b.CompletedAt) ||
		!slices.Equal(ptrSlice(a.ErrorCode), ptrSlice(b.ErrorCode)) || string(a.Result) != string(b.Result) {
		t.Fatalf("%s changed the proposal: %+v -> %+v", what, b, a)
	}
	if after.audits != before.audits || after.allAudits != before.allAudits {
		t.Fatalf("%s appended audit rows: %d -> %d of the proposal, %d -> %d in all", what, before.audits, after.audits, before.allAudits, after.allAudits)
	}
	if after.nextSequence != before.nextSequence {
		t.Fatalf("%s appended frames: next_sequence %d -> %d", what, before.nextSequence, after.nextSequence)
	}
	if after.turn != before.turn {
		t.Fatalf("%s moved the turn %s -> %s", what, before.turn, after.turn)
	}
}

// wantStatusConflict checks a conflict whose details name the proposal's state.
func wantStatusConflict(t *testing.T, err error, status store.ProposalStatus, what string) {
	t.Helper()
	if !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("%s: err = %v, want conflict", what, err)
	}
	if pe := protocol.ErrorOf(err); pe.Details["status"] != string(status) {
		t.Fatalf("%s: conflict details = %v, want status %q", what, pe.Details, status)
	}
}

// --- creation -----------------------------------------------------------------

func testProposalCreate(t *testing.T, f *fixture) {
	c, tr := f.running()
	sig := f.s.FrameSignal(c.ID)
	want := f.newProposal(c.ID, tr.RequestID)
	now := f.tick()
	got, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: want, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig, "CreateProposal")
	for _, p := range []store.Proposal{got, f.proposal(want.ID)} {
		wantProposal(t, p, want, now)
		wantProposalState(t, p, store.ProposalPending, nil, nil, nil, nil)
	}

	// The proposal frame carries what the human confirms; the confirmation
	// frame says that a confirmation is required.
	cp := protocol.CommandProposal{ID: want.ID, CommandType: want.CommandType, Command: want.Command, CommandHash: want.CommandHash,
		Risk: want.Risk, Summary: want.Summary, Target: want.Target, IdempotencyKey: want.IdempotencyKey,
		ExpiresAt: protocol.Timestamp(want.ExpiresAt)}
	wantTail(t, f, c.ID, tr.RequestID, c.LastSequence(), now,
		protocol.ProposalPayload{Proposal: cp},
		protocol.ConfirmationPayload{ProposalID: want.ID, State: protocol.ConfirmationRequired})
	frames := f.frames(c.ID)
	pp, ok := payloadOf(t, frames[1]).(protocol.ProposalPayload)
	if !ok || pp.Proposal.ID != want.ID || pp.Proposal.CommandHash != want.CommandHash || pp.Proposal.Target == nil ||
		*pp.Proposal.Target != *want.Target || pp.Proposal.ExpiresAt != protocol.Timestamp(want.ExpiresAt) ||
		pp.Proposal.Risk != want.Risk || pp.Proposal.IdempotencyKey != want.IdempotencyKey || !jsonEqual(t, pp.Proposal.Command, want.Command) {
		t.Fatalf("proposal frame decodes to %#v", payloadOf(t, frames[1]))
	}
	if cf, ok := payloadOf(t, frames[2]).(protocol.ConfirmationPayload); !ok || cf.ProposalID != want.ID || cf.State != protocol.ConfirmationRequired {
		t.Fatalf("confirmation frame decodes to %#v", payloadOf(t, frames[2]))
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnRunning {
		t.Fatalf("proposing moved the turn to %s", g.Status)
	}

	// A proposal without a target; its frames follow the first one's.
	bare := f.newProposal(c.ID, tr.RequestID)
	bare.Target, bare.Risk = nil, protocol.RiskMutate
	now = f.tick()
	if _, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: bare, Now: now}); err != nil {
		t.Fatal(err)
	}
	wantProposal(t, f.proposal(bare.ID), bare, now)
	cp = protocol.CommandProposal{ID: bare.ID, CommandType: bare.CommandType, Command: bare.Command, CommandHash: bare.CommandHash,
		Risk: bare.Risk, Summary: bare.Summary, IdempotencyKey: bare.IdempotencyKey, ExpiresAt: protocol.Timestamp(bare.ExpiresAt)}
	wantTail(t, f, c.ID, tr.RequestID, 3, now,
		protocol.ProposalPayload{Proposal: cp},
		protocol.ConfirmationPayload{ProposalID: bare.ID, State: protocol.ConfirmationRequired})
}

// wantNoProposal checks that a refused creation left no proposal and no frame.
func wantNoProposal(t *testing.T, f *fixture, before store.Conversation, id, what string) {
	t.Helper()
	_, err := f.s.GetProposal(f.ctx, id)
	if !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("%s: GetProposal err = %v, want not_found", what, err)
	}
	if after := f.get(before.ID); after.NextSequence != before.NextSequence {
		t.Fatalf("%s: next_sequence %d -> %d", what, before.NextSequence, after.NextSequence)
	}
}

func testProposalCreateNotActive(t *testing.T, f *fixture) {
	c, tr := f.running()
	_, otherTurn := f.running()
	refuse := func(requestID string, code protocol.ErrorCode, what string) {
		t.Helper()
		before := f.get(c.ID)
		p := f.newProposal(c.ID, requestID)
		_, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: p, Now: f.tick()})
		if !protocol.IsCode(err, code) {
			t.Fatalf("%s: err = %v, want %s", what, err, code)
		}
		wantNoProposal(t, f, before, p.ID, what)
	}
	refuse(newID(), protocol.Conflict, "an unknown request")
	refuse(otherTurn.RequestID, protocol.Conflict, "another conversation's active turn")
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	refuse(tr.RequestID, protocol.Conflict, "a finished turn")
	f.submit(c.ID)
	refuse(tr.RequestID, protocol.Conflict, "a turn after a newer one was submitted")

	p := f.newProposal(newID(), tr.RequestID)
	_, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: p, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.GetProposal(f.ctx, p.ID)
	wantCode(t, err, protocol.NotFound)
}

// testProposalCreateInvalid: a proposal its frame cannot carry is the
// caller's validation error; a reused id or idempotency key is refused.
// Neither leaves a row or a frame.
func testProposalCreateInvalid(t *testing.T, f *fixture) {
	c, tr := f.running()
	for name, change := range map[string]func(p *store.Proposal){
		"unknown risk":          func(p *store.Proposal) { p.Risk = "reckless" },
		"command not an object": func(p *store.Proposal) { p.Command = jsontext.Value(`["launch"]`) },
		"no command hash":       func(p *store.Proposal) { p.CommandHash = "" },
		"no idempotency key":    func(p *store.Proposal) { p.IdempotencyKey = "" },
		"no command type":       func(p *store.Proposal) { p.CommandType = "" },
	} {
		before := f.get(c.ID)
		p := f.newProposal(c.ID, tr.RequestID)
		change(&p)
		_, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: p, Now: f.tick()})
		if !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("%s: err = %v, want validation", name, err)
		}
		wantNoProposal(t, f, before, p.ID, name)
	}

	first := f.propose(c.ID, tr.RequestID)
	before := f.get(c.ID)
	dupID := f.newProposal(c.ID, tr.RequestID)
	dupID.ID = first.ID
	if _, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: dupID, Now: f.tick()}); err == nil {
		t.Fatal("a proposal with an existing id was stored")
	}
	dupKey := f.newProposal(c.ID, tr.RequestID)
	dupKey.IdempotencyKey = first.IdempotencyKey
	if _, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: dupKey, Now: f.tick()}); err == nil {
		t.Fatal("a proposal with an existing idempotency key was stored")
	}
	wantNoProposal(t, f, before, dupKey.ID, "a reused idempotency key")
	wantProposal(t, f.proposal(first.ID), first, first.CreatedAt)
	if ps, err := f.s.ListProposals(f.ctx, store.ListProposalsParams{ConversationID: c.ID}); err != nil || len(ps) != 1 {
		t.Fatalf("ListProposals = %d proposals, %v; want only the first", len(ps), err)
	}
}

func testProposalGetMissing(t *testing.T, f *fixture) {
	_, err := f.s.GetProposal(f.ctx, newID())
	wantCode(t, err, protocol.NotFound)
}

func testProposalList(t *testing.T, f *fixture) {
	a, ta1 := f.running()
	p1 := f.propose(a.ID, ta1.RequestID)
	p2 := f.propose(a.ID, ta1.RequestID)
	if _, _, err := f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: p1.ID, Status: store.ProposalCancelled,
		Audit: proposalAudit(p1.ID, protocol.DecisionDenied, f.clock.Now()), Now: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	f.finish(ta1.RequestID, store.TurnCompleted, nil) // p2 stays pending
	ta2, _ := f.submit(a.ID)
	p3 := f.propose(a.ID, ta2.RequestID)
	p4 := f.propose(a.ID, ta2.RequestID)
	f.confirm(p4)
	b, tb := f.running()
	p5 := f.propose(b.ID, tb.RequestID)

	statuses := func(ss ...store.ProposalStatus) []store.ProposalStatus { return ss }
	for _, tc := range []struct {
		name string
		p    store.ListProposalsParams
		want []store.Proposal
	}{
		{"all", store.ListProposalsParams{}, []store.Proposal{p5, p4, p3, p2, p1}},
		{"conversation", store.ListProposalsParams{ConversationID: a.ID}, []store.Proposal{p4, p3, p2, p1}},
		{"other conversation", store.ListProposalsParams{ConversationID: b.ID}, []store.Proposal{p5}},
		{"request", store.ListProposalsParams{RequestID: ta1.RequestID}, []store.Proposal{p2, p1}},
		{"pending", store.ListProposalsParams{Statuses: statuses(store.ProposalPending)}, []store.Proposal{p5, p3, p2}},
		{"pending or executing in a conversation", store.ListProposalsParams{ConversationID: a.ID,
			Statuses: statuses(store.ProposalPending, store.ProposalExecuting)}, []store.Proposal{p4, p3, p2}},
		{"cancelled", store.ListProposalsParams{Statuses: statuses(store.ProposalCancelled)}, []store.Proposal{p1}},
		{"every filter", store.ListProposalsParams{ConversationID: a.ID, RequestID: ta2.RequestID,
			Statuses: statuses(store.ProposalExecuting)}, []store.Proposal{p4}},
		{"request of another conversation", store.ListProposalsParams{ConversationID: b.ID, RequestID: ta1.RequestID}, nil},
		{"no such status", store.ListProposalsParams{Statuses: statuses(store.ProposalSucceeded, store.ProposalFailed)}, nil},
		{"limit", store.ListProposalsParams{Limit: 2}, []store.Proposal{p5, p4}},
		{"limit, filtered", store.ListProposalsParams{ConversationID: a.ID, Limit: 3}, []store.Proposal{p4, p3, p2}},
	} {
		got, err := f.s.ListProposals(f.ctx, tc.p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var gotIDs, wantIDs []string
		for _, p := range got {
			gotIDs = append(gotIDs, p.ID)
		}
		for _, p := range tc.want {
			wantIDs = append(wantIDs, p.ID)
		}
		if !slices.Equal(gotIDs, wantIDs) {
			t.Fatalf("%s: listed %v, want %v (newest first)", tc.name, gotIDs, wantIDs)
		}
		for i, p := range got {
			stored := f.proposal(p.ID)
			wantProposal(t, p, stored, tc.want[i].CreatedAt)
			if p.Status != stored.Status || !sameTime(p.ConfirmedAt, stored.ConfirmedAt) || !sameTime(p.CompletedAt, stored.CompletedAt) {
				t.Fatalf("%s: listed %+v, stored %+v", tc.name, p, stored)
			}
			if len(tc.p.Statuses) > 0 && !slices.Contains(tc.p.Statuses, p.Status) {
				t.Fatalf("%s: listed a %s proposal", tc.name, p.Status)
			}
		}
	}
}

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
	snap = f.snapshot(executing.ID)
	for _, st := range []store.ProposalStatus{store.ProposalPending, store.ProposalExecuting, store.ProposalCancelled, store.ProposalConfirmed, ""} {
		if err := finish(executing.ID, st); !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("finish as %q: err = %v, want validation", st, err)
		}
		wantUnchanged(t, f, snap, fmt.Sprintf("finish as %q", st))
	}
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

	snap = f.snapshot(pending.ID)
	for _, st := range []store.ProposalStatus{store.ProposalSucceeded, store.ProposalFailed, store.ProposalPending, store.ProposalExecuting, ""} {
		if err := closeAs(pending.ID, st); !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("close as %q: err = %v, want validation", st, err)
		}
		wantUnchanged(t, f, snap, fmt.Sprintf("close as %q", st))
	}
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

// --- atomicity ------------------------------------------------------------------

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
