package httpapi_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// The seams between doors, each a test that failed before every door
// asked the one policy.

// deleteScheduleScript proposes deleting the schedule "nightly" (risk
// mutate, impact irreversible), and a vacuum (risk admin).
var deleteScheduleScript = script.Script{Turns: []script.Turn{
	{Match: "delete", Steps: []script.Step{
		{Tool: ptr("delete_schedule"), Arguments: jsontext.Value(`{"schedule":"nightly"}`)},
		{Text: ptr("decided")},
	}},
	{Match: "vacuum", Steps: []script.Step{
		{Tool: ptr("run_maintenance"), Arguments: jsontext.Value(`{"action":"vacuum"}`)},
		{Text: ptr("decided")},
	}},
	{Steps: []script.Step{{Text: ptr("ok")}}},
}}

// nightly creates the schedule the scripts delete.
func (h *harness) nightly() studio.Schedule {
	h.t.Helper()
	sc, err := h.client.CreateSchedule(h.ctx(), studio.CreateScheduleCommand{Name: "nightly", Cron: "0 3 * * *", Playbook: "audit-repo",
		Input: "repo x", Args: map[string]string{"repo": "x"}})
	if err != nil {
		h.t.Fatal(err)
	}
	return sc
}

// TestFourEyesFollowsTheImpactOrder: under --second-approver-for
// destructive, deleting a schedule (impact irreversible, above
// destructive) cannot be confirmed by its author; another operator can.
func TestFourEyesFollowsTheImpactOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &deleteScheduleScript, principals: true, serveApp: true, secondApprover: []string{"destructive"}})
	h.nightly()
	alice := h.principal("alice", protocol.RoleOperator)
	bob := h.principal("bob", protocol.RoleOperator)
	conv, prop := h.proposalOf(alice, "delete the nightly schedule")
	if prop.Impact != protocol.ImpactIrreversible {
		t.Fatalf("proposal impact %q", prop.Impact)
	}
	_, err := alice.Confirm(h.ctx(), conv.ID, prop.ID, confirmReq(prop))
	wantDenied(t, err, "reason", "second_approver_required")
	if res, err := bob.Confirm(h.ctx(), conv.ID, prop.ID, confirmReq(prop)); err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("another operator's confirm = %+v, %v", res, err)
	}
}

// TestAdminRiskOneRule: a command of risk admin follows one rule through
// every door — an approver never does one alone (its own proposal is
// refused, and its direct command is sent for approval), another
// approver's confirm runs it, and an admin runs it directly.
func TestAdminRiskOneRule(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &deleteScheduleScript, principals: true, serveApp: true})
	anna := h.principal("anna", protocol.RoleApprover)
	ben := h.principal("ben", protocol.RoleApprover)
	conv, prop := h.proposalOf(anna, "vacuum the database")
	if prop.Risk != protocol.RiskAdmin {
		t.Fatalf("proposal risk %q", prop.Risk)
	}
	_, err := anna.Confirm(h.ctx(), conv.ID, prop.ID, confirmReq(prop))
	wantDenied(t, err, "reason", "second_approver_required")
	_, err = anna.Maintenance(h.ctx(), studio.RunMaintenanceCommand{Action: "vacuum"})
	if req := pendingApproval(t, err); req.SubmittedBy != "anna" || req.Risk != protocol.RiskAdmin {
		t.Fatalf("anna's direct vacuum: %+v", req)
	}
	if res, err := ben.Confirm(h.ctx(), conv.ID, prop.ID, confirmReq(prop)); err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("another approver's confirm = %+v, %v", res, err)
	}
	if _, err := h.client.Maintenance(h.ctx(), studio.RunMaintenanceCommand{Action: "vacuum"}); err != nil {
		t.Fatalf("the admin's vacuum: %v", err)
	}
}

// privateIndeterminate leaves a proposal indeterminate (executing, its
// result unrecorded) in a private conversation of bob's, and returns it.
func (h *harness) privateIndeterminate(bob *apiclient.Client) (protocol.Conversation, protocol.CommandProposal) {
	h.t.Helper()
	conv := h.conversationOf(bob, protocol.CreateConversationRequest{Visibility: ptr(protocol.VisibilityPrivate)})
	prop := h.proposedBy(bob, conv.ID, "launch audit")
	h.faults.Fail("FinishProposal", true)
	_, err := bob.Confirm(h.ctx(), conv.ID, prop.ID, confirmReq(prop))
	h.faults.Fail("FinishProposal", false)
	if err != nil {
		h.t.Fatal(err)
	}
	return conv, prop
}

// TestHealthShowsOnlyWhatOneMayRead: system health lists an indeterminate
// proposal of bob's private conversation to bob and to admins, never to
// a viewer.
func TestHealthShowsOnlyWhatOneMayRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript, principals: true, serveApp: true})
	bob := h.principal("bob", protocol.RoleOperator)
	vic := h.principal("vic", protocol.RoleViewer)
	conv, prop := h.privateIndeterminate(bob)
	shows := func(c *apiclient.Client) bool {
		var raw jsontext.Value
		if err := c.Do(h.ctx(), "GET", "/api/app/system/health", nil, &raw); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(raw), prop.ID) || strings.Contains(string(raw), conv.ID)
	}
	if shows(vic) {
		t.Fatal("a viewer's health report lists another principal's private conversation")
	}
	if !shows(bob) || !shows(h.client) {
		t.Fatal("the owner's or the admin's health report misses the indeterminate proposal")
	}
}

// TestAuditShowsOnlyWhatOneMayRead: the audit trail's rows about bob's
// private conversation are left out for a viewer; a webhook's URL (a
// Slack incoming webhook's is a credential) is never shown to one who may
// not manage webhooks (the redactor hides it as it is stored; a row an
// older daemon kept whole is cut to its origin).
func TestAuditShowsOnlyWhatOneMayRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript, principals: true, serveApp: true})
	bob := h.principal("bob", protocol.RoleOperator)
	vic := h.principal("vic", protocol.RoleViewer)
	conv, _ := h.privateIndeterminate(bob)
	const secret = "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX"
	if _, err := h.client.CreateWebhook(h.ctx(), protocol.CreateWebhookRequest{URL: secret, Events: []string{"proposal.pending"}, Format: "slack"}); err != nil {
		t.Fatal(err)
	}
	trail := func(c *apiclient.Client) string {
		page, err := c.ListAudit(h.ctx(), url.Values{"limit": {"200"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := protocol.Marshal(page)
		return string(b)
	}
	got := trail(vic)
	if strings.Contains(got, conv.ID) {
		t.Error("a viewer's audit trail has rows about another principal's private conversation")
	}
	if strings.Contains(got, "XXXXXXXX") || !strings.Contains(got, "studio.webhook.created") {
		t.Errorf("a viewer's audit trail shows the webhook's URL, or misses its row: %s", got)
	}
	if all := trail(h.client); !strings.Contains(all, conv.ID) || !strings.Contains(all, "studio.webhook.created") {
		t.Error("the admin's audit trail misses the private conversation's rows or the webhook's row")
	}
	if own := trail(bob); !strings.Contains(own, conv.ID) {
		t.Error("the owner's audit trail misses its own private conversation's rows")
	}
}

// TestTicketDecidedAgainAtRedemption: a ticket minted before the
// conversation turned private, or before the minter's token was revoked,
// opens no stream.
func TestTicketDecidedAgainAtRedemption(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true})
	bob := h.principal("bob", protocol.RoleOperator)
	vicToken := h.principalToken("vic", protocol.RoleViewer)
	vic := h.as(vicToken)
	conv := h.conversationOf(bob, protocol.CreateConversationRequest{})
	first, err := vic.CreateTicket(h.ctx(), protocol.StreamTicketRequest{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.UpdateConversation(h.ctx(), conv.ID, protocol.UpdateConversationRequest{Visibility: ptr(protocol.VisibilityPrivate)}); err != nil {
		t.Fatal(err)
	}
	err = vic.StreamWithTicket(h.ctx(), conv.ID, 0, first.Ticket, func(protocol.Frame) error { return apiclient.ErrStopStream })
	wantCode(t, err, protocol.NotFound)

	if _, err := bob.UpdateConversation(h.ctx(), conv.ID, protocol.UpdateConversationRequest{Visibility: ptr(protocol.VisibilityTeam)}); err != nil {
		t.Fatal(err)
	}
	second, err := vic.CreateTicket(h.ctx(), protocol.StreamTicketRequest{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.DisablePrincipal(h.ctx(), "vic"); err != nil {
		t.Fatal(err)
	}
	err = h.as("").StreamWithTicket(h.ctx(), conv.ID, 0, second.Ticket, func(protocol.Frame) error { return apiclient.ErrStopStream })
	wantCode(t, err, protocol.AuthRequired)
}

// streamEnds opens c's stream of conv and returns a channel that receives
// the error it ends with.
func streamEnds(ctx context.Context, c *apiclient.Client, convID string) (<-chan error, <-chan struct{}) {
	ended, opened := make(chan error, 1), make(chan struct{})
	go func() {
		ended <- c.Stream(ctx, convID, 0, func(protocol.Frame) error {
			select {
			case <-opened:
			default:
				close(opened)
			}
			return nil
		})
	}()
	return ended, opened
}

// TestOpenStreamEndsWhenTheRightGoes: an open stream ends with
// access_revoked as soon as its right to read goes — the conversation
// made private, the token revoked, the role lowered — with no frame or
// heartbeat to wake it (heartbeats are an hour apart here).
func TestOpenStreamEndsWhenTheRightGoes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, heartbeat: time.Hour})
	bob := h.principal("bob", protocol.RoleOperator)
	conv := h.submitted(bob) // a frame to open on, so the stream is known to be live
	for _, tc := range []struct {
		name   string
		role   protocol.Role
		revoke func(name string)
	}{
		{"visibility", protocol.RoleViewer, func(string) {
			if _, err := bob.UpdateConversation(h.ctx(), conv.ID, protocol.UpdateConversationRequest{Visibility: ptr(protocol.VisibilityPrivate)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"revoked", protocol.RoleViewer, func(name string) {
			if _, err := h.client.DisablePrincipal(h.ctx(), name); err != nil {
				t.Fatal(err)
			}
		}},
		{"role", protocol.RoleAdmin, func(name string) {
			if _, err := h.client.SetPrincipalRole(h.ctx(), name, protocol.RoleOperator); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The role case reads a private conversation as an admin.
			if _, err := bob.UpdateConversation(h.ctx(), conv.ID, protocol.UpdateConversationRequest{
				Visibility: ptr(map[bool]string{true: protocol.VisibilityPrivate, false: protocol.VisibilityTeam}[tc.name == "role"])}); err != nil {
				t.Fatal(err)
			}
			name := "reader-" + tc.name
			reader := h.principal(name, tc.role)
			ended, opened := streamEnds(h.ctx(), reader, conv.ID)
			select {
			case <-opened:
			case err := <-ended:
				t.Fatalf("the stream ended before the change: %v", err)
			}
			start := time.Now()
			tc.revoke(name)
			err := <-ended
			if !protocol.IsCode(err, protocol.AccessRevoked) {
				t.Fatalf("the stream ended with %v, want access_revoked", err)
			}
			t.Logf("ended %v after the change", time.Since(start))
		})
	}
}

// TestAppEventsEndWhenTheTokenGoes: the application's change stream is
// decided again too: revoking its principal ends it with access_revoked.
func TestAppEventsEndWhenTheTokenGoes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, serveApp: true, heartbeat: time.Hour})
	vic := h.principal("vic", protocol.RoleViewer)
	ended, opened := make(chan error, 1), make(chan struct{})
	go func() {
		ended <- vic.AppEvents(h.ctx(), -1, func(studio.ChangeEvent) error {
			select {
			case <-opened:
			default:
				close(opened)
			}
			return nil
		})
	}()
	// A change the stream sees says it is open.
	n := 0
	testutil.Eventually(t, func() bool {
		select {
		case <-opened:
			return true
		default:
		}
		n++
		if _, err := h.client.CreatePlaybook(h.ctx(), studio.CreatePlaybookCommand{Name: fmt.Sprintf("change-%d", n), Prompt: "x"}); err != nil {
			t.Fatal(err)
		}
		return false
	})
	if _, err := h.client.DisablePrincipal(h.ctx(), "vic"); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; !protocol.IsCode(err, protocol.AccessRevoked) {
		t.Fatalf("the change stream ended with %v, want access_revoked", err)
	}
}

// submitted is a team conversation of c's with one turn done.
func (h *harness) submitted(c *apiclient.Client) protocol.Conversation {
	h.t.Helper()
	conv := h.conversationOf(c, protocol.CreateConversationRequest{})
	acc, err := c.SubmitTurn(h.ctx(), conv.ID, turnRequest("hello", 0))
	if err != nil {
		h.t.Fatal(err)
	}
	h.waitDone(conv.ID, acc.RequestID)
	return conv
}

// bobsProposal is a daemon where bob's proposal waits in bob's team
// conversation, and two others who may act on it: bot (an agent) and
// carol (an operator).
func bobsProposal(t *testing.T) (h *harness, bot, carol *apiclient.Client, conv protocol.Conversation, prop protocol.CommandProposal) {
	t.Helper()
	h = newHarness(t, harnessOpts{script: &proposalScript, principals: true})
	bob := h.principal("bob", protocol.RoleOperator)
	bot = h.principal("bot", protocol.RoleAgent)
	carol = h.principal("carol", protocol.RoleOperator)
	conv, prop = h.proposalOf(bob, "launch audit")
	return h, bot, carol, conv, prop
}

// TestCancelThatClosesAnothersProposalIsADeny: cancelling bob's turn
// while its proposal waits closes that proposal: an agent (who may not
// deny) is refused and nothing changes; an operator's cancel closes it
// with the operator as its decider, in the proposal and the audit.
func TestCancelThatClosesAnothersProposalIsADeny(t *testing.T) {
	t.Parallel()
	h, bot, carol, conv, prop := bobsProposal(t)
	st, err := h.client.Proposal(h.ctx(), prop.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bot.Cancel(h.ctx(), conv.ID, st.RequestID)
	wantDenied(t, err, "needed", "operator")
	if cur, _ := h.store.GetProposal(h.ctx(), prop.ID); cur.Status != store.ProposalPending {
		t.Fatalf("after the refused cancel the proposal is %s", cur.Status)
	}
	if _, err := carol.Cancel(h.ctx(), conv.ID, st.RequestID); err != nil {
		t.Fatal(err)
	}
	h.waitDone(conv.ID, st.RequestID)
	cur, err := h.store.GetProposal(h.ctx(), prop.ID)
	if err != nil || cur.Status != store.ProposalCancelled || cur.DecidedBy != "carol" {
		t.Fatalf("after carol's cancel: %+v, %v", cur, err)
	}
	if a := h.actors(prop.ID); a[protocol.DecisionDenied] != "carol" {
		t.Fatalf("audit actors %v, want the denial by carol", a)
	}
}

// TestInterruptThatClosesAnothersProposalIsADeny: a turn sent with
// whenBusy interrupt cancels the active turn, so it is decided as that
// cancel: an agent interrupting bob's turn while its proposal waits is
// refused and nothing is stored; an operator's interrupt closes the
// proposal with the operator as its decider.
func TestInterruptThatClosesAnothersProposalIsADeny(t *testing.T) {
	t.Parallel()
	h, bot, carol, conv, prop := bobsProposal(t)
	interrupt := func(c *apiclient.Client) (protocol.TurnAccepted, error) {
		page, err := c.GetConversation(h.ctx(), conv.ID, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		req := turnRequest("something else", page.LatestSequence)
		req.WhenBusy = protocol.WhenBusyInterrupt
		return c.SubmitTurn(h.ctx(), conv.ID, req)
	}
	_, err := interrupt(bot)
	wantDenied(t, err, "needed", "operator")
	if cur, _ := h.store.GetProposal(h.ctx(), prop.ID); cur.Status != store.ProposalPending {
		t.Fatalf("after the refused interrupt the proposal is %s", cur.Status)
	}
	if waiting, err := h.store.ListWaitingTurns(h.ctx(), conv.ID); err != nil || len(waiting) != 0 {
		t.Fatalf("after the refused interrupt %d turns wait (%v)", len(waiting), err)
	}
	if _, err := interrupt(carol); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, func() bool {
		cur, err := h.store.GetProposal(h.ctx(), prop.ID)
		return err == nil && cur.Status == store.ProposalCancelled
	})
	cur, err := h.store.GetProposal(h.ctx(), prop.ID)
	if err != nil || cur.DecidedBy != "carol" {
		t.Fatalf("after carol's interrupt: %+v, %v", cur, err)
	}
}

// TestDenialsAreAudited: a refused request is on the record (principal,
// action, resource, reason), and a flood of them cannot drown the trail.
func TestDenialsAreAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, serveApp: true})
	vic := h.principal("vic", protocol.RoleViewer)
	for range 50 {
		_, err := vic.CreateConversation(h.ctx(), protocol.CreateConversationRequest{})
		wantDenied(t, err, "needed", "agent")
	}
	rows, err := h.store.ListAdminEvents(h.ctx(), store.ListAdminEventsParams{Action: policy.ActionDenied, Actor: "vic", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || len(rows) > policy.DefaultDenialBurst+1 {
		t.Fatalf("%d denial rows for 50 refused requests, want 1 to %d", len(rows), policy.DefaultDenialBurst+1)
	}
	var d map[string]any
	if err := protocol.Unmarshal(rows[0].Details, &d); err != nil {
		t.Fatal(err)
	}
	if d["action"] != string(policy.CreateConversation) || d["reason"] != policy.ReasonRole || d["resource"] != `Studio::"studio"` {
		t.Fatalf("denial details %v", d)
	}
	// Time passes: the next one says how many were left out.
	h.clock.Advance(time.Hour)
	_, err = vic.CreateConversation(h.ctx(), protocol.CreateConversationRequest{})
	wantDenied(t, err, "needed", "agent")
	rows, err = h.store.ListAdminEvents(h.ctx(), store.ListAdminEventsParams{Action: policy.ActionDenied, Actor: "vic", Limit: 1})
	if err != nil || len(rows) != 1 {
		t.Fatal(rows, err)
	}
	if err := protocol.Unmarshal(rows[0].Details, &d); err != nil {
		t.Fatal(err)
	}
	if n, _ := d["suppressed"].(float64); int(n) != 50-policy.DefaultDenialBurst {
		t.Fatalf("suppressed = %v, want %d", d["suppressed"], 50-policy.DefaultDenialBurst)
	}
}
