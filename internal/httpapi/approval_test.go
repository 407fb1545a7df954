package httpapi_test

import (
	"bytes"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/openapi/openapitest"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// A direct command that needs a second approver becomes an approval
// request: a pending proposal another principal decides.

// pendingApproval is the approval request err carries (fatal when none).
func pendingApproval(t *testing.T, err error) protocol.ApprovalRequest {
	t.Helper()
	var ap *apiclient.ApprovalPendingError
	if !errors.As(err, &ap) {
		t.Fatalf("err = %v, want the approval request (202)", err)
	}
	return ap.Request
}

// deleteWithKey is DELETE /api/app/schedules/{ref} by token with an
// Idempotency-Key: the status and the approval request it answers.
func (h *harness) deleteWithKey(token, ref, key string) (int, protocol.ApprovalRequest) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.ctx(), http.MethodDelete, h.srv.URL+"/api/app/schedules/"+ref, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		h.t.Fatal(err)
	}
	var ar protocol.ApprovalRequest
	if resp.StatusCode == http.StatusAccepted {
		if err := protocol.Unmarshal(buf.Bytes(), &ar); err != nil {
			h.t.Fatal(err)
		}
		if loc := resp.Header.Get("Location"); loc != "/api/operator/proposals/"+ar.ID {
			h.t.Fatalf("Location %q for proposal %s", loc, ar.ID)
		}
	}
	return resp.StatusCode, ar
}

// TestDirectCommandUnderFourEyesIsSentForApproval: under
// --second-approver-for destructive, alice's direct delete (both routes)
// answers 202 with a pending proposal and the message, runs nothing, and
// she cannot confirm it; it waits in bob's inbox, not hers; bob's
// confirm deletes the schedule once (a repeat runs nothing); both names
// are on the record.
func TestDirectCommandUnderFourEyesIsSentForApproval(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, serveApp: true, secondApprover: []string{"destructive"}})
	sc := h.nightly()
	// alice's answers are checked against the OpenAPI document.
	alice := apiclient.New(h.srv.URL, h.principalToken("alice", protocol.RoleOperator),
		&http.Client{Transport: openapitest.New(t).Transport(h.srv.Client().Transport)})
	bob := h.as(h.principalToken("bob", protocol.RoleOperator))
	ctx := h.ctx()

	err := alice.Do(ctx, "POST", "/api/app/commands/delete_schedule", map[string]any{"schedule": "nightly"}, nil)
	first := pendingApproval(t, err)
	if first.Status != string(store.ProposalPending) || first.Message != protocol.ApprovalPendingMessage || first.CommandHash == "" ||
		first.ExpiresAt == 0 || first.CommandType != "delete_schedule" || first.SubmittedBy != "alice" || first.Target == nil {
		t.Fatalf("approval request %+v", first)
	}
	if _, err := h.client.GetSchedule(ctx, sc.ID); err != nil {
		t.Fatalf("the schedule is gone before anyone approved: %v", err)
	}
	// Sent again without a key it is another request of the same command.
	_, err = alice.DeleteSchedule(ctx, sc.ID, 0)
	second := pendingApproval(t, err)
	if second.ID == first.ID {
		t.Fatal("two requests without a key are one")
	}
	if res, err := alice.Deny(ctx, second.ConversationID, second.ID); err != nil || res.Status != protocol.ResultCancelled {
		t.Fatalf("alice withdraws her second request: %+v, %v", res, err)
	}

	_, err = alice.Confirm(ctx, first.ConversationID, first.ID, confirmReq(first.CommandProposal))
	wantDenied(t, err, "reason", "second_approver_required")
	if mine, err := alice.Decidable(ctx); err != nil || len(mine) != 0 {
		t.Fatalf("alice's inbox %+v, %v: her own request is not hers to decide", mine, err)
	}
	inbox, err := bob.Decidable(ctx)
	if err != nil || len(inbox) != 1 || inbox[0].ID != first.ID {
		t.Fatalf("bob's inbox %+v, %v", inbox, err)
	}
	res, err := bob.Confirm(ctx, first.ConversationID, first.ID, confirmReq(first.CommandProposal))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("bob's confirm = %+v, %v", res, err)
	}
	if _, err := h.client.GetSchedule(ctx, sc.ID); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("the schedule after bob's confirm: %v", err)
	}
	if res, err := bob.Confirm(ctx, first.ConversationID, first.ID, confirmReq(first.CommandProposal)); err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("repeat = %+v, %v", res, err)
	}
	cmds, err := h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: studio.ActionCommand, Limit: 100})
	deletes := 0
	for _, r := range cmds {
		if bytes.Contains(r.Details, []byte(`"delete_schedule"`)) {
			deletes++
		}
	}
	if err != nil || deletes != 1 {
		t.Fatalf("%d schedule deletes (%v), want 1", deletes, err)
	}
	view, err := alice.Proposal(ctx, first.ID)
	if err != nil || view.SubmittedBy != "alice" || view.DecidedBy != "bob" {
		t.Fatalf("proposal view submitted by %q, decided by %q (%v)", view.SubmittedBy, view.DecidedBy, err)
	}
	if a := h.actors(first.ID); a[protocol.DecisionConfirmed] != "bob" || a[protocol.DecisionExecuted] != "bob" {
		t.Fatalf("audit actors %v, want bob confirmed and executed", a)
	}
	asked, err := h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: coordinator.ApprovalRequestedAction, TargetID: first.ID, Limit: 10})
	if err != nil || len(asked) != 1 || asked[0].Actor != "alice" {
		t.Fatalf("approval request rows %+v, %v: want one by alice", asked, err)
	}
	// The request's turn asked no model: it ended once decided.
	testutil.Eventually(t, func() bool {
		page, err := alice.GetConversation(ctx, first.ConversationID, 0, 1)
		return err == nil && page.Conversation.ActiveRequestID == nil
	}, "the approval request's turn ends")
}

// TestApprovalRequestIdempotencyKey: the same Idempotency-Key from the
// same principal is the same request — at once, concurrently, and after
// it was decided — never a second one; another command under the key is
// conflict; another principal's same key is theirs.
func TestApprovalRequestIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, serveApp: true, secondApprover: []string{"destructive"}})
	sc := h.nightly()
	aliceToken := h.principalToken("alice", protocol.RoleOperator)
	bob := h.as(h.principalToken("bob", protocol.RoleOperator))
	ctx := h.ctx()

	const n = 4
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, ar := h.deleteWithKey(aliceToken, sc.ID, "k-1"); code == http.StatusAccepted {
				ids[i] = ar.ID
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("requests under one key: %v", ids)
		}
	}
	pending, err := bob.Decidable(ctx)
	if err != nil || len(pending) != 1 {
		t.Fatalf("bob's inbox %+v, %v: want the one request", pending, err)
	}
	if res, err := bob.Deny(ctx, pending[0].ConversationID, pending[0].ID); err != nil || res.Status != protocol.ResultCancelled {
		t.Fatalf("bob's deny = %+v, %v", res, err)
	}
	// After the deny the key still names the same (closed) request.
	if code, ar := h.deleteWithKey(aliceToken, sc.ID, "k-1"); code != http.StatusAccepted || ar.ID != ids[0] || ar.Status != string(store.ProposalCancelled) {
		t.Fatalf("after the deny: %d %+v", code, ar)
	}
	if _, err := h.client.GetSchedule(ctx, sc.ID); err != nil {
		t.Fatalf("the schedule after the deny: %v", err)
	}
	// The key with another command is refused.
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, h.srv.URL+"/api/app/schedules/"+sc.ID+"?expectedVersion=1", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Idempotency-Key", "k-1")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("the key with another command: %d, want 409", resp.StatusCode)
	}
}
