package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testProposalCreate(t *testing.T, f *fixture) {
	c, tr := f.running()
	sig := f.s.FrameSignal(c.ID)
	want := f.newProposal(c.ID, tr.RequestID)
	want.Impact, want.TargetName, want.Origin = protocol.ImpactIrreversible, "audit-repo", protocol.ProposalOriginRequest
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
		ExpiresAt: protocol.Timestamp(want.ExpiresAt), Impact: want.Impact, TargetName: want.TargetName, Origin: protocol.ProposalOriginRequest}
	wantTail(t, f, c.ID, tr.RequestID, c.LastSequence(), now,
		protocol.ProposalPayload{Proposal: cp},
		protocol.ConfirmationPayload{ProposalID: want.ID, State: protocol.ConfirmationRequired})
	frames := f.frames(c.ID)
	pp, ok := payloadOf(t, frames[1]).(protocol.ProposalPayload)
	if !ok || pp.Proposal.ID != want.ID || pp.Proposal.CommandHash != want.CommandHash || pp.Proposal.Target == nil ||
		*pp.Proposal.Target != *want.Target || pp.Proposal.ExpiresAt != protocol.Timestamp(want.ExpiresAt) ||
		pp.Proposal.Risk != want.Risk || pp.Proposal.IdempotencyKey != want.IdempotencyKey ||
		pp.Proposal.Impact != want.Impact || pp.Proposal.TargetName != want.TargetName || !jsonEqual(t, pp.Proposal.Command, want.Command) {
		t.Fatalf("proposal frame decodes to %#v", payloadOf(t, frames[1]))
	}
	if cf, ok := payloadOf(t, frames[2]).(protocol.ConfirmationPayload); !ok || cf.ProposalID != want.ID || cf.State != protocol.ConfirmationRequired {
		t.Fatalf("confirmation frame decodes to %#v", payloadOf(t, frames[2]))
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnRunning {
		t.Fatalf("proposing moved the turn to %s", g.Status)
	}

	// A proposal without a target, with an audit row written in its
	// transaction; its frames follow the first one's.
	bare := f.newProposal(c.ID, tr.RequestID)
	bare.Target, bare.Risk = nil, protocol.RiskMutate
	now = f.tick()
	if _, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: bare, Now: now, Audit: agentProposalAudit(bare.ID, now)}); err != nil {
		t.Fatal(err)
	}
	if rows := f.audits(bare.ID); len(rows) != 1 || rows[0].Action != "test.proposed" || rows[0].Actor != "agent" {
		t.Fatalf("the proposal's audit rows: %+v, want its one row", rows)
	}
	wantProposal(t, f.proposal(bare.ID), bare, now)
	cp = protocol.CommandProposal{ID: bare.ID, CommandType: bare.CommandType, Command: bare.Command, CommandHash: bare.CommandHash,
		Risk: bare.Risk, Summary: bare.Summary, IdempotencyKey: bare.IdempotencyKey, ExpiresAt: protocol.Timestamp(bare.ExpiresAt),
		Origin: protocol.ProposalOriginTurn} // a turn's unless said
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
		now := f.tick()
		_, err := f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: p, Now: now, Audit: agentProposalAudit(p.ID, now)})
		if !protocol.IsCode(err, code) {
			t.Fatalf("%s: err = %v, want %s", what, err, code)
		}
		wantNoProposal(t, f, before, p.ID, what)
		if rows := f.audits(p.ID); len(rows) != 0 {
			t.Fatalf("%s: a refused proposal left audit rows %+v", what, rows)
		}
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

// agentProposalAudit is an audit row written with a proposal (an agent's).
func agentProposalAudit(id string, now time.Time) *store.AppendAdminEventParams {
	return &store.AppendAdminEventParams{Actor: "agent", Action: "test.proposed", TargetID: &id, Details: jsontext.Value(`{"client":"ide"}`), Now: now}
}
