package httpapi_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// call sends a JSON body (or none) with a bearer token and returns the
// status and the error body's error, when it has one.
func call(t *testing.T, base, token, method, path, body string) (int, *protocol.Error) {
	t.Helper()
	status, b := rawCall(t, method, base+path, http.Header{"Authorization": {"Bearer " + token}}, body)
	var eb protocol.ErrorBody
	if b != nil && protocol.Unmarshal(b, &eb) == nil && eb.Error != nil {
		return status, eb.Error
	}
	return status, nil
}

// rawCall sends a JSON body (or none) to url with header and returns the
// status and the body; a stream that opened is left (a nil body): it never
// ends by itself.
func rawCall(t *testing.T, method, url string, header http.Header, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, nil
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func convIDs(l protocol.ConversationList) []string {
	var out []string
	for _, c := range l.Conversations {
		out = append(out, c.ID)
	}
	return out
}

// TestPrivateConversationIsNotFoundToOthers: another principal's private
// conversation answers every conversation-scoped route exactly as a
// missing one does (404 not_found, the same message), is absent from its
// listings, search and the proposals list, while its owner and an admin
// see and use it; the owner makes it the team's and then others see it.
func TestPrivateConversationIsNotFoundToOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript, principals: true})
	aliceToken, bobToken := h.principalToken("alice", protocol.RoleOperator), h.principalToken("bob", protocol.RoleApprover)
	alice, bob, admin, ctx := h.as(aliceToken), h.as(bobToken), h.client, h.ctx()

	priv, err := alice.CreateConversation(ctx, protocol.CreateConversationRequest{Title: ptr("nightly secret"), Visibility: ptr(protocol.VisibilityPrivate)})
	if err != nil {
		t.Fatal(err)
	}
	if priv.Owner != "alice" || priv.Visibility != protocol.VisibilityPrivate {
		t.Fatalf("created: owner %q visibility %q", priv.Owner, priv.Visibility)
	}
	team, err := bob.CreateConversation(ctx, protocol.CreateConversationRequest{Title: ptr("nightly shared")})
	if err != nil {
		t.Fatal(err)
	}
	if team.Owner != "bob" || team.Visibility != protocol.VisibilityTeam {
		t.Fatalf("default: owner %q visibility %q, want bob, team", team.Owner, team.Visibility)
	}
	prop := h.proposedBy(alice, priv.ID, "launch audit")

	// Every conversation-scoped route: bob's answer for alice's private
	// conversation is the answer for a conversation that does not exist.
	missing := uuid.NewString()
	hash := `{"expectedCommandHash":"` + prop.CommandHash + `"}`
	routes := []struct{ method, path, body string }{
		{"GET", "/api/operator/conversations/{id}", ""},
		{"PATCH", "/api/operator/conversations/{id}", `{"title":"mine now"}`},
		{"PATCH", "/api/operator/conversations/{id}", `{"visibility":"team"}`},
		{"DELETE", "/api/operator/conversations/{id}", ""},
		{"POST", "/api/operator/conversations/{id}/turns", `{"instruction":"hi","context":{"space":"mission","route":"/"},"expectedLastSequence":0}`},
		{"POST", "/api/operator/conversations/{id}/requests/" + uuid.NewString() + "/cancel", ""},
		{"GET", "/api/operator/conversations/{id}/stream", ""},
		{"POST", "/api/operator/conversations/{id}/effects/" + uuid.NewString() + "/ack", `{"status":"applied","clientRoute":"/"}`},
		{"POST", "/api/operator/conversations/{id}/proposals/" + prop.ID + "/confirm", hash},
		{"POST", "/api/operator/conversations/{id}/proposals/" + prop.ID + "/deny", ""},
		{"POST", "/api/operator/conversations/{id}/proposals/" + prop.ID + "/amend", `{"expectedCommandHash":"` + prop.CommandHash + `","command":{"playbook":"audit-repo"}}`},
		{"GET", "/api/operator/conversations/{id}/proposals", ""},
		{"GET", "/api/operator/conversations/{id}/proposals/" + prop.ID, ""},
		{"POST", "/api/operator/conversations/{id}/fork", `{}`},
		{"POST", "/api/operator/conversations/{id}/restore", ""},
		{"POST", "/api/operator/conversations/{id}/view", `{"space":"mission","route":"/","observedAt":1700000000}`},
	}
	for _, rt := range routes {
		hidden, hiddenErr := call(t, h.srv.URL, bobToken, rt.method, strings.ReplaceAll(rt.path, "{id}", priv.ID), rt.body)
		absent, absentErr := call(t, h.srv.URL, bobToken, rt.method, strings.ReplaceAll(rt.path, "{id}", missing), rt.body)
		if hidden != http.StatusNotFound || hiddenErr == nil || hiddenErr.Code != protocol.NotFound {
			t.Errorf("%s %s as bob: %d %+v, want 404 not_found", rt.method, rt.path, hidden, hiddenErr)
			continue
		}
		if absentErr == nil || hidden != absent || strings.ReplaceAll(hiddenErr.Message, priv.ID, "ID") != strings.ReplaceAll(absentErr.Message, missing, "ID") {
			t.Errorf("%s %s: hidden %d %+v, missing %d %+v: the answers differ", rt.method, rt.path, hidden, hiddenErr, absent, absentErr)
		}
	}
	// A proposal by id alone, and a stream ticket.
	if _, err := bob.Proposal(ctx, prop.ID); !protocol.IsCode(err, protocol.NotFound) {
		t.Errorf("bob's proposal by id: %v, want not_found", err)
	}
	if _, err := bob.CreateTicket(ctx, protocol.StreamTicketRequest{ConversationID: priv.ID}); !protocol.IsCode(err, protocol.NotFound) {
		t.Errorf("bob's stream ticket: %v, want not_found", err)
	}
	// Nothing bob tried changed it.
	if p, err := alice.Proposal(ctx, prop.ID); err != nil || p.Status != string(store.ProposalPending) {
		t.Fatalf("the proposal after bob's attempts: %+v, %v", p, err)
	}

	// Listings, search and the proposals list.
	if l, err := bob.ListConversations(ctx, "", "", 50); err != nil || !slices.Equal(convIDs(l), []string{team.ID}) {
		t.Fatalf("bob's list: %v, %v; want only %s", convIDs(l), err, team.ID)
	}
	if l, err := bob.SearchConversations(ctx, "nightly", ""); err != nil || !slices.Equal(convIDs(l), []string{team.ID}) {
		t.Fatalf("bob's search: %v, %v; want only %s", convIDs(l), err, team.ID)
	}
	if ps, err := bob.Proposals(ctx, ""); err != nil || len(ps) != 0 {
		t.Fatalf("bob's proposals: %+v, %v; want none", ps, err)
	}
	for who, token := range map[string]string{"alice": aliceToken, "owner (admin)": testToken} {
		c := h.as(token)
		l, err := c.ListConversations(ctx, "", "", 50)
		if err != nil || !slices.Contains(convIDs(l), priv.ID) || !slices.Contains(convIDs(l), team.ID) {
			t.Fatalf("%s's list: %v, %v; want both", who, convIDs(l), err)
		}
		ps, err := c.Proposals(ctx, "")
		if err != nil || len(ps) != 1 || ps[0].ID != prop.ID {
			t.Fatalf("%s's proposals: %+v, %v", who, ps, err)
		}
	}
	if _, err := admin.GetConversation(ctx, priv.ID, 0, 10); err != nil {
		t.Fatalf("the admin reads it: %v", err)
	}

	// Only the owner (or an admin) changes the visibility; then bob sees it.
	if _, err := bob.UpdateConversation(ctx, team.ID, protocol.UpdateConversationRequest{Visibility: ptr("everyone")}); !protocol.IsCode(err, protocol.Validation) {
		t.Fatalf("a bad visibility: %v, want validation", err)
	}
	if _, err := alice.UpdateConversation(ctx, team.ID, protocol.UpdateConversationRequest{Visibility: ptr(protocol.VisibilityPrivate)}); err == nil {
		t.Fatal("alice changed the visibility of bob's conversation")
	} else {
		wantDenied(t, err, "reason", "owner")
	}
	shared, err := alice.UpdateConversation(ctx, priv.ID, protocol.UpdateConversationRequest{Visibility: ptr(protocol.VisibilityTeam)})
	if err != nil || shared.Visibility != protocol.VisibilityTeam || shared.Owner != "alice" {
		t.Fatalf("alice shares it: %+v, %v", shared, err)
	}
	if _, err := bob.GetConversation(ctx, priv.ID, 0, 10); err != nil {
		t.Fatalf("bob reads the shared conversation: %v", err)
	}
	if ps, err := bob.Proposals(ctx, ""); err != nil || len(ps) != 1 {
		t.Fatalf("bob's proposals once shared: %+v, %v", ps, err)
	}
	// A fork is its forker's, with its source's visibility.
	fork, err := bob.ForkConversation(ctx, priv.ID, protocol.ForkRequest{UpToSequence: ptr(int64(0))})
	if err != nil || fork.Conversation.Owner != "bob" || fork.Conversation.Visibility != protocol.VisibilityTeam {
		t.Fatalf("bob's fork: %+v, %v", fork.Conversation, err)
	}
}

// TestRestoreOfAnotherPrincipalsPrivateConversation: a deleted private
// conversation is not_found to others' restore, as a missing one; its
// owner restores it.
func TestRestoreOfAnotherPrincipalsPrivateConversation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true})
	alice, bob, ctx := h.principal("alice", protocol.RoleOperator), h.principal("bob", protocol.RoleOperator), h.ctx()
	c, err := alice.CreateConversation(ctx, protocol.CreateConversationRequest{Visibility: ptr(protocol.VisibilityPrivate)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.DeleteConversation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if l, err := bob.ListConversations(ctx, "deleted", "", 50); err != nil || len(l.Conversations) != 0 {
		t.Fatalf("bob's deleted list: %v, %v", convIDs(l), err)
	}
	if _, err := bob.RestoreConversation(ctx, c.ID); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("bob's restore: %v, want not_found", err)
	}
	if got, err := alice.RestoreConversation(ctx, c.ID); err != nil || got.Status != "active" {
		t.Fatalf("alice's restore: %+v, %v", got, err)
	}
}

// TestTurnAndAckAudited: a submitted turn and an acknowledged effect each
// write an audit row whose actor is the principal that did it.
func TestTurnAndAckAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &effectScript, principals: true})
	alice := h.principal("alice", protocol.RoleOperator)
	ctx := h.ctx()
	conv, err := alice.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := alice.SubmitTurn(ctx, conv.ID, turnRequest("go fleet", 0))
	if err != nil {
		t.Fatal(err)
	}
	var ui *protocol.UICommandPayload
	h.until(conv.ID, 0, func(f protocol.Frame) bool {
		if p, ok := f.Payload.(protocol.UICommandPayload); ok && ui == nil {
			ui = &p
		}
		return f.Type == protocol.FrameDone && f.RequestID == acc.RequestID
	})
	rows, err := h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: "studio.operator.turn_submitted"})
	if err != nil || len(rows) != 1 || rows[0].Actor != "alice" || rows[0].TargetID == nil || *rows[0].TargetID != acc.RequestID {
		t.Fatalf("turn audit rows %+v, %v; want one of alice for %s", rows, err, acc.RequestID)
	}
	if ui == nil {
		t.Fatal("the turn emitted no effect")
	}
	route := "/?view=fleet&status=failed"
	if _, err := alice.AckEffect(ctx, conv.ID, ui.EffectID, protocol.AckEffectRequest{Status: "applied", ClientRoute: &route}); err != nil {
		t.Fatal(err)
	}
	rows, err = h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: "studio.operator.effect_acknowledged"})
	if err != nil || len(rows) != 1 || rows[0].Actor != "alice" || rows[0].TargetID == nil || *rows[0].TargetID != ui.EffectID {
		t.Fatalf("ack audit rows %+v, %v; want one of alice", rows, err)
	}
}
