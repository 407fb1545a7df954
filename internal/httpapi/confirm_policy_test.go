package httpapi_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// conversationOf creates a conversation as c's principal.
func (h *harness) conversationOf(c *apiclient.Client, req protocol.CreateConversationRequest) protocol.Conversation {
	h.t.Helper()
	conv, err := c.CreateConversation(h.ctx(), req)
	if err != nil {
		h.t.Fatal(err)
	}
	return conv
}

// proposalOf is a proposal of c's principal, for instruction, waiting in
// a new team conversation of theirs.
func (h *harness) proposalOf(c *apiclient.Client, instruction string) (protocol.Conversation, protocol.CommandProposal) {
	h.t.Helper()
	conv := h.conversationOf(c, protocol.CreateConversationRequest{})
	return conv, h.proposedBy(c, conv.ID, instruction)
}

// proposedBy submits "launch …" (or another instruction) as the client's
// principal and waits for the proposal's confirmation(required) frame.
func (h *harness) proposedBy(c *apiclient.Client, convID, instruction string) protocol.CommandProposal {
	h.t.Helper()
	page, err := c.GetConversation(h.ctx(), convID, 0, 1)
	if err != nil {
		h.t.Fatal(err)
	}
	acc, err := c.SubmitTurn(h.ctx(), convID, turnRequest(instruction, page.LatestSequence))
	if err != nil {
		h.t.Fatal(err)
	}
	var prop protocol.CommandProposal
	h.until(convID, acc.AcceptedSequence-1, func(f protocol.Frame) bool {
		if p, ok := f.Payload.(protocol.ProposalPayload); ok {
			prop = p.Proposal
		}
		cp, ok := f.Payload.(protocol.ConfirmationPayload)
		return ok && cp.State == protocol.ConfirmationRequired
	})
	return prop
}

// actors are the actors of a proposal's D8 audit rows by decision.
func (h *harness) actors(proposalID string) map[protocol.Decision]string {
	h.t.Helper()
	rows, err := h.store.ListAdminEvents(h.ctx(), store.ListAdminEventsParams{Action: protocol.AuditAction, TargetID: proposalID})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[protocol.Decision]string{}
	for _, r := range rows {
		var d protocol.CommandAudit
		if err := protocol.Unmarshal(r.Details, &d); err != nil {
			h.t.Fatal(err)
		}
		out[d.Decision] = r.Actor
	}
	return out
}

func wantDenied(t *testing.T, err error, key, value string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.Denied || pe.Details[key] != value {
		t.Fatalf("err = %v, want 403 denied with %s=%s", err, key, value)
	}
}

// TestFourEyesSecondApprover: with --second-approver-for execute, the
// author's confirm of an execute proposal is refused and changes nothing;
// another operator's confirm executes it once; both principals are on the
// record (proposal view, confirmation frame, audit rows). Denying one's
// own is allowed.
func TestFourEyesSecondApprover(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript, principals: true, secondApprover: []string{"execute"}})
	alice := h.principal("alice", protocol.RoleOperator)
	bob := h.principal("bob", protocol.RoleOperator)
	ctx := h.ctx()
	conv, err := alice.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	prop := h.proposedBy(alice, conv.ID, "launch audit")
	_, err = alice.Confirm(ctx, conv.ID, prop.ID, confirmReq(prop))
	wantDenied(t, err, "reason", "second_approver_required")
	if n := h.runCount(); n != 0 {
		t.Fatalf("%d runs after the refused confirm", n)
	}
	res, err := bob.Confirm(ctx, conv.ID, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("bob's confirm = %+v, %v", res, err)
	}
	if n := h.runCount(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
	// A repeat answers the stored outcome; nothing runs again.
	if res, err := bob.Confirm(ctx, conv.ID, prop.ID, confirmReq(prop)); err != nil || res.Status != protocol.ResultSucceeded || h.runCount() != 1 {
		t.Fatalf("repeat = %+v, %v, %d runs", res, err, h.runCount())
	}
	view, err := alice.Proposal(ctx, prop.ID)
	if err != nil || view.SubmittedBy != "alice" || view.DecidedBy != "bob" {
		t.Fatalf("proposal view submitted by %q, decided by %q (%v)", view.SubmittedBy, view.DecidedBy, err)
	}
	if a := h.actors(prop.ID); a[protocol.DecisionConfirmed] != "bob" || a[protocol.DecisionExecuted] != "bob" {
		t.Fatalf("audit actors %v, want bob confirmed and executed", a)
	}
	var decided string
	h.until(conv.ID, 0, func(f protocol.Frame) bool {
		if cp, ok := f.Payload.(protocol.ConfirmationPayload); ok && cp.State == protocol.ConfirmationConfirmed {
			decided = cp.DecidedBy
		}
		return f.Type == protocol.FrameDone
	})
	if decided != "bob" {
		t.Fatalf("confirmation frame decidedBy %q, want bob", decided)
	}

	// Her own next proposal alice may deny.
	own := h.proposedBy(alice, conv.ID, "launch again")
	if res, err := alice.Deny(ctx, conv.ID, own.ID); err != nil || res.Status != protocol.ResultCancelled {
		t.Fatalf("alice's deny of her own = %+v, %v", res, err)
	}
	if a := h.actors(own.ID); a[protocol.DecisionDenied] != "alice" {
		t.Fatalf("deny audit actors %v", a)
	}
}

// TestWithoutSecondApproverTheAuthorConfirms: four-eyes is off by
// default: the author confirms her own.
func TestWithoutSecondApproverTheAuthorConfirms(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript, principals: true})
	alice := h.principal("alice", protocol.RoleOperator)
	conv, err := alice.CreateConversation(h.ctx(), protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	prop := h.proposedBy(alice, conv.ID, "launch audit")
	if res, err := alice.Confirm(h.ctx(), conv.ID, prop.ID, confirmReq(prop)); err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm = %+v, %v", res, err)
	}
}

// adminScript proposes a command of risk admin.
var adminScript = script.Script{Turns: []script.Turn{
	{Match: "check", Steps: []script.Step{
		{Tool: ptr("run_maintenance"), Arguments: jsontext.Value(`{"action":"integrity_check"}`)},
		{Text: ptr("done")},
	}},
	{Steps: []script.Step{{Text: ptr("ok")}}},
}}

// TestConfirmRoleFollowsRisk: an operator confirms execute, not admin
// (403 naming approver); an approver confirms another's admin proposal;
// an agent confirms nothing (403 naming the least role for this one).
func TestConfirmRoleFollowsRisk(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &adminScript, principals: true})
	op := h.principal("olga", protocol.RoleOperator)
	ap := h.principal("anna", protocol.RoleApprover)
	ag := h.principal("bot", protocol.RoleAgent)
	conv, err := ag.CreateConversation(h.ctx(), protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	prop := h.proposedBy(ag, conv.ID, "check the database")
	if prop.Risk != protocol.RiskAdmin {
		t.Fatalf("proposal risk %q", prop.Risk)
	}
	_, err = ag.Confirm(h.ctx(), conv.ID, prop.ID, confirmReq(prop))
	wantDenied(t, err, "needed", "approver")
	_, err = op.Confirm(h.ctx(), conv.ID, prop.ID, confirmReq(prop))
	wantDenied(t, err, "needed", "approver")
	res, err := ap.Confirm(h.ctx(), conv.ID, prop.ID, confirmReq(prop))
	if err != nil || res.Status == protocol.ResultExecuting {
		t.Fatalf("the approver's confirm = %+v, %v", res, err)
	}
	if a := h.actors(prop.ID); a[protocol.DecisionConfirmed] != "anna" {
		t.Fatalf("audit actors %v", a)
	}
}

// TestFourEyesAmendmentIsItsAmenders: an amended proposal is the command
// of the principal that amended it: under four-eyes the amender cannot
// confirm it, the turn's author can; the amendment is audited with the
// amender as actor.
func TestFourEyesAmendmentIsItsAmenders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript, principals: true, secondApprover: []string{"execute"}})
	alice := h.principal("alice", protocol.RoleOperator)
	bob := h.principal("bob", protocol.RoleOperator)
	ctx := h.ctx()
	conv, err := alice.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	prop := h.proposedBy(alice, conv.ID, "launch audit")
	amended, err := bob.AmendProposal(ctx, conv.ID, prop.ID, protocol.AmendProposalRequest{ExpectedCommandHash: prop.CommandHash,
		Command: jsontext.Value(`{"playbook":"audit-repo","input":"repo y","args":{"repo":"y"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if amended.SubmittedBy != "bob" {
		t.Fatalf("the amendment is submitted by %q, want bob", amended.SubmittedBy)
	}
	_, err = bob.Confirm(ctx, conv.ID, amended.ID, confirmReq(amended.CommandProposal))
	wantDenied(t, err, "reason", "second_approver_required")
	if res, err := alice.Confirm(ctx, conv.ID, amended.ID, confirmReq(amended.CommandProposal)); err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("alice's confirm of bob's amendment = %+v, %v", res, err)
	}
	if a := h.actors(prop.ID); a[protocol.DecisionDenied] != "bob" {
		t.Fatalf("the amended original's audit actors %v", a)
	}
}

// TestWhoamiTellsTheFourEyesPolicy: whoami answers the principal and the
// risks and impacts that need a second approver, so the cockpit can say
// "waiting for another approver" instead of offering a confirm that fails;
// without a policy the list is empty, not missing.
func TestWhoamiTellsTheFourEyesPolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, secondApprover: []string{"execute", "destructive"}})
	alice := h.principal("alice", protocol.RoleOperator)
	who, err := alice.Whoami(h.ctx())
	if err != nil || who.Name != "alice" || who.Role != protocol.RoleOperator || !slices.Equal(who.SecondApproverFor, []string{"execute", "destructive"}) {
		t.Fatalf("whoami = %+v, %v", who, err)
	}
	plain := newHarness(t, harnessOpts{principals: true})
	var raw map[string]any
	if err := plain.as(testToken).Do(plain.ctx(), "GET", "/api/auth/whoami", nil, &raw); err != nil {
		t.Fatal(err)
	}
	if list, ok := raw["secondApproverFor"].([]any); !ok || len(list) != 0 {
		t.Fatalf("whoami without a policy = %v; want secondApproverFor: []", raw)
	}
}

// waitingScript proposes an execute command ("launch") and an admin one
// ("check").
var waitingScript = script.Script{Turns: append([]script.Turn{proposalScript.Turns[0], adminScript.Turns[0]}, proposalScript.Turns[len(proposalScript.Turns)-1])}

// TestDecidableProposals: ?decidable=true lists the pending proposals the
// caller may confirm, by the confirm's own decision: the role the risk
// needs, and four-eyes (not one's own, when the policy says so); a
// decided proposal leaves the list; a bad value is validation.
func TestDecidableProposals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &waitingScript, principals: true, secondApprover: []string{"execute"}})
	alice := h.principal("alice", protocol.RoleOperator)
	bob := h.principal("bob", protocol.RoleOperator)
	anna := h.principal("anna", protocol.RoleApprover)
	vera := h.principal("vera", protocol.RoleViewer)
	ctx := h.ctx()
	conv, err := alice.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	launch := h.proposedBy(alice, conv.ID, "launch audit")
	other, err := bob.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	check := h.proposedBy(bob, other.ID, "check the database")
	waiting := func(c *apiclient.Client) []string {
		t.Helper()
		var out struct {
			Proposals []protocol.ProposalState `json:"proposals"`
		}
		if err := c.Do(ctx, "GET", "/api/operator/proposals?status=pending&decidable=true", nil, &out); err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, p := range out.Proposals {
			ids = append(ids, p.ID)
		}
		slices.Sort(ids)
		return ids
	}
	both := []string{launch.ID, check.ID}
	slices.Sort(both)
	for _, tc := range []struct {
		who  string
		c    *apiclient.Client
		want []string
	}{
		{"alice (operator, author of the execute one)", alice, []string{}},
		{"bob (operator)", bob, []string{launch.ID}},
		{"anna (approver)", anna, both},
		{"vera (viewer)", vera, []string{}},
	} {
		if got := waiting(tc.c); !slices.Equal(got, tc.want) {
			t.Errorf("%s waits for %v, want %v", tc.who, got, tc.want)
		}
	}
	// Every proposal the list offers, its reader may confirm.
	if res, err := bob.Confirm(ctx, conv.ID, launch.ID, confirmReq(launch)); err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("bob's confirm = %+v, %v", res, err)
	}
	if got := waiting(anna); !slices.Equal(got, []string{check.ID}) {
		t.Errorf("after the confirm anna waits for %v", got)
	}
	if err := anna.Do(ctx, "GET", "/api/operator/proposals?decidable=yes", nil, nil); !protocol.IsCode(err, protocol.Validation) {
		t.Fatalf("decidable=yes: %v", err)
	}
}
