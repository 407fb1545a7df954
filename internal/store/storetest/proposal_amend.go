package storetest

import (
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func amendParams(f *fixture, orig store.Proposal) store.AmendProposalParams {
	np := f.newProposal(orig.ConversationID, orig.RequestID)
	np.CallID = orig.CallID
	np.Command = []byte(`{"args":{"a":"9","b":"2"},"playbook":"audit-repo"}`)
	np.CommandHash = "amended-hash"
	now := f.tick()
	return store.AmendProposalParams{ID: orig.ID, Proposal: np, Audit: proposalAudit(orig.ID, protocol.DecisionDenied, now), Now: now,
		Link: store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AmendAction, TargetID: ptr(orig.ID),
			Details: []byte(`{"proposal_id":"` + orig.ID + `","amended_by":"` + np.ID + `"}`), Now: now}}
}

func testAmend(t *testing.T, f *fixture) {
	c, tr := f.running()
	orig := f.propose(c.ID, tr.RequestID)
	f.park(tr.RequestID, true)
	lastBefore := f.get(c.ID).LastSequence()
	before := f.auditCount()
	p := amendParams(f, orig)
	got, err := f.s.AmendProposal(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != p.Proposal.ID || got.Status != store.ProposalPending || got.AmendedFrom == nil || *got.AmendedFrom != orig.ID ||
		got.CallID != orig.CallID || got.CommandHash != "amended-hash" {
		t.Fatalf("amended = %+v", got)
	}
	was := f.proposal(orig.ID)
	if was.Status != store.ProposalCancelled || was.ErrorCode == nil || *was.ErrorCode != protocol.ReasonAmended || was.CompletedAt == nil {
		t.Fatalf("original = %+v", was)
	}
	if f.auditCount() != before+2 || len(f.audits(orig.ID)) != 2 {
		t.Fatal("amend did not write its two audit rows (the close and the link)")
	}
	if f.turn(tr.RequestID).Status != store.TurnAwaitingConfirmation {
		t.Fatal("the turn stopped waiting for the human")
	}
	frames := f.frames(c.ID)[lastBefore:]
	if len(frames) != 3 {
		t.Fatalf("amend frames = %d", len(frames))
	}
	if cp := payloadOf(t, frames[0]).(protocol.ConfirmationPayload); cp.ProposalID != orig.ID || cp.State != protocol.ConfirmationAmended {
		t.Fatalf("frame 1 = %+v", cp)
	}
	if pp := payloadOf(t, frames[1]).(protocol.ProposalPayload); pp.Proposal.ID != got.ID || pp.Proposal.Amends == nil || *pp.Proposal.Amends != orig.ID {
		t.Fatalf("frame 2 = %+v", pp)
	}
	if cp := payloadOf(t, frames[2]).(protocol.ConfirmationPayload); cp.ProposalID != got.ID || cp.State != protocol.ConfirmationRequired {
		t.Fatalf("frame 3 = %+v", cp)
	}
	// The amended proposal goes on like any other.
	f.confirm(got)
}

func testAmendNotPending(t *testing.T, f *fixture) {
	c, tr := f.running()
	orig := f.propose(c.ID, tr.RequestID)
	f.confirm(orig)
	before, frames := f.auditCount(), len(f.frames(c.ID))
	_, err := f.s.AmendProposal(f.ctx, amendParams(f, orig))
	pe := wantCode(t, err, protocol.Conflict)
	if pe.Details["status"] != string(store.ProposalExecuting) {
		t.Fatalf("details = %v", pe.Details)
	}
	// A proposal of another call cannot pose as the amendment.
	c2, tr2 := f.running()
	orig2 := f.propose(c2.ID, tr2.RequestID)
	p := amendParams(f, orig2)
	p.Proposal.CallID = "call_other"
	_, err = f.s.AmendProposal(f.ctx, p)
	wantCode(t, err, protocol.Validation)
	if f.proposal(orig2.ID).Status != store.ProposalPending {
		t.Fatal("a refused amend changed the original")
	}
	if f.auditCount() != before || len(f.frames(c.ID)) != frames {
		t.Fatal("a refused amend wrote something")
	}
}
