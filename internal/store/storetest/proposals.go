package storetest

import (
	"cmp"
	"fmt"
	"slices"
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
		got.Impact != want.Impact || got.TargetName != want.TargetName || !got.ExpiresAt.Equal(want.ExpiresAt) || !got.CreatedAt.Equal(created) {
		t.Fatalf("proposal = %+v, want %+v created at %v", got, want, created)
	}
	if (got.Target == nil) != (want.Target == nil) || (got.Target != nil && *got.Target != *want.Target) {
		t.Fatalf("proposal target = %+v, want %+v", got.Target, want.Target)
	}
	if !jsonEqual(t, got.Command, want.Command) {
		t.Fatalf("proposal command = %s, want %s", got.Command, want.Command)
	}
	if origin := cmp.Or(want.Origin, protocol.ProposalOriginTurn); got.Origin != origin { // a turn's unless said
		t.Fatalf("proposal origin = %q, want %q", got.Origin, origin)
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

// wantStatusesRefused: a transition (verb) of proposal id to any of
// statuses is validation and changes nothing.
func wantStatusesRefused(t *testing.T, f *fixture, id, verb string, to func(id string, st store.ProposalStatus) error, statuses ...store.ProposalStatus) {
	t.Helper()
	snap := f.snapshot(id)
	for _, st := range statuses {
		if err := to(id, st); !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("%s as %q: err = %v, want validation", verb, st, err)
		}
		wantUnchanged(t, f, snap, fmt.Sprintf("%s as %q", verb, st))
	}
}
