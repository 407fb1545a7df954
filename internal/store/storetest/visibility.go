package storetest

import (
	"slices"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseVisibility runs the conformance suite of conversation ownership
// and visibility: a conversation records its owner and is private or team
// (team by default), the listings keep what a principal may see when
// asked, a fork belongs to its forker with its source's visibility; and
// the audit rows a submitted turn and an acknowledged effect carry commit
// with them.
func ExerciseVisibility(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := subtests(t, open)
	run("Defaults", testVisibilityDefaults)
	run("OwnerAndPrivate", testVisibilityOwnerPrivate)
	run("ListVisibleTo", testVisibilityList)
	run("SearchVisibleTo", testVisibilitySearch)
	run("Update", testVisibilityUpdate)
	run("Fork", testVisibilityFork)
	run("ProposalsVisibleTo", testVisibilityProposals)
	run("SubmitAudit", testSubmitAudit)
	run("AckAudit", testAckAudit)
}

// owned creates a conversation of owner with a visibility and a title.
func (f *fixture) owned(owner, visibility, title string) store.Conversation {
	f.t.Helper()
	c, err := f.s.CreateConversation(f.ctx, store.CreateConversationParams{ID: newID(), Title: ptr(title),
		Owner: owner, Visibility: visibility, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("CreateConversation: %v", err)
	}
	return c
}

func testVisibilityDefaults(t *testing.T, f *fixture) {
	c := f.conversation()
	if c.Owner != protocol.OwnerPrincipal || c.Visibility != protocol.VisibilityTeam {
		t.Fatalf("owner, visibility = %q, %q; want %q, team", c.Owner, c.Visibility, protocol.OwnerPrincipal)
	}
}

func testVisibilityOwnerPrivate(t *testing.T, f *fixture) {
	c := f.owned("alice", protocol.VisibilityPrivate, "mine")
	got := f.get(c.ID)
	if got.Owner != "alice" || got.Visibility != protocol.VisibilityPrivate {
		t.Fatalf("owner, visibility = %q, %q; want alice, private", got.Owner, got.Visibility)
	}
	if !got.VisibleTo("alice", protocol.RoleViewer) || got.VisibleTo("bob", protocol.RoleApprover) || !got.VisibleTo("bob", protocol.RoleAdmin) {
		t.Fatal("a private conversation is visible to its owner and admins only")
	}
	if _, err := f.s.CreateConversation(f.ctx, store.CreateConversationParams{ID: newID(), Visibility: "public", Now: f.tick()}); err == nil {
		t.Fatal("a visibility other than private or team was stored")
	}
}

func testVisibilityList(t *testing.T, f *fixture) {
	alicePrivate := f.owned("alice", protocol.VisibilityPrivate, "a1")
	aliceTeam := f.owned("alice", protocol.VisibilityTeam, "a2")
	bobPrivate := f.owned("bob", protocol.VisibilityPrivate, "b1")
	all := []string{bobPrivate.ID, aliceTeam.ID, alicePrivate.ID}
	if got := ids(list(t, f, store.ListConversationsParams{Limit: 10})); !slices.Equal(got, all) {
		t.Fatalf("unfiltered list = %v, want %v", got, all)
	}
	if got, want := ids(list(t, f, store.ListConversationsParams{VisibleTo: "alice", Limit: 10})), []string{aliceTeam.ID, alicePrivate.ID}; !slices.Equal(got, want) {
		t.Fatalf("alice's list = %v, want %v", got, want)
	}
	if got, want := ids(list(t, f, store.ListConversationsParams{VisibleTo: "bob", Limit: 10})), []string{bobPrivate.ID, aliceTeam.ID}; !slices.Equal(got, want) {
		t.Fatalf("bob's list = %v, want %v", got, want)
	}
	// Paging keeps the filter: one row a page.
	page := list(t, f, store.ListConversationsParams{VisibleTo: "carol", Limit: 1})
	if got := ids(page); !slices.Equal(got, []string{aliceTeam.ID}) {
		t.Fatalf("carol's list = %v, want only the team's", got)
	}
	next := list(t, f, store.ListConversationsParams{VisibleTo: "carol", Limit: 1, AfterCreated: &page[0].CreatedAt, AfterID: page[0].ID})
	if len(next) != 0 {
		t.Fatalf("carol's second page = %v, want none", ids(next))
	}
}

func testVisibilitySearch(t *testing.T, f *fixture) {
	secret := f.owned("alice", protocol.VisibilityPrivate, "nightly secret")
	shared := f.owned("alice", protocol.VisibilityTeam, "nightly shared")
	if got := ids(list(t, f, store.ListConversationsParams{Terms: []string{"nightly"}, VisibleTo: "bob", Limit: 10})); !slices.Equal(got, []string{shared.ID}) {
		t.Fatalf("bob's search = %v, want only %s", got, shared.ID)
	}
	if got := ids(list(t, f, store.ListConversationsParams{Terms: []string{"secret"}, VisibleTo: "alice", Limit: 10})); !slices.Equal(got, []string{secret.ID}) {
		t.Fatalf("alice's search = %v, want %s", got, secret.ID)
	}
}

func testVisibilityUpdate(t *testing.T, f *fixture) {
	c := f.owned("alice", protocol.VisibilityTeam, "x")
	got := f.update(store.UpdateConversationParams{ID: c.ID, Visibility: ptr(protocol.VisibilityPrivate), Now: f.tick()})
	if got.Visibility != protocol.VisibilityPrivate || got.Owner != "alice" {
		t.Fatalf("after update: owner, visibility = %q, %q", got.Owner, got.Visibility)
	}
	_, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Visibility: ptr("everyone"), Now: f.tick()})
	wantCode(t, err, protocol.Validation)
	if f.get(c.ID).Visibility != protocol.VisibilityPrivate {
		t.Fatal("a refused update changed the visibility")
	}
}

func testVisibilityFork(t *testing.T, f *fixture) {
	src := f.owned("alice", protocol.VisibilityPrivate, "src")
	f.completeTurn(src.ID, "hello")
	fork, err := f.s.ForkConversation(f.ctx, store.ForkConversationParams{SourceID: src.ID, ID: newID(), NewRequestID: newID,
		Owner: "bob", Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	if fork.Owner != "bob" || fork.Visibility != protocol.VisibilityPrivate {
		t.Fatalf("fork: owner, visibility = %q, %q; want bob, private", fork.Owner, fork.Visibility)
	}
}

func testVisibilityProposals(t *testing.T, f *fixture) {
	propose := func(c store.Conversation) store.Proposal {
		tr, _ := f.submit(c.ID)
		if _, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()}); err != nil {
			t.Fatal(err)
		}
		return f.propose(c.ID, tr.RequestID)
	}
	private := propose(f.owned("alice", protocol.VisibilityPrivate, "p"))
	team := propose(f.owned("alice", protocol.VisibilityTeam, "t"))
	pids := func(visibleTo string) []string {
		ps, err := f.s.ListProposals(f.ctx, store.ListProposalsParams{VisibleTo: visibleTo, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return out
	}
	if got := pids(""); !slices.Equal(got, []string{team.ID, private.ID}) {
		t.Fatalf("all proposals = %v", got)
	}
	if got := pids("alice"); !slices.Equal(got, []string{team.ID, private.ID}) {
		t.Fatalf("alice's proposals = %v", got)
	}
	if got := pids("bob"); !slices.Equal(got, []string{team.ID}) {
		t.Fatalf("bob's proposals = %v, want only %s", got, team.ID)
	}
}

func personAudit(f *fixture, actor, action, target string) *store.AppendAdminEventParams {
	return &store.AppendAdminEventParams{Actor: actor, Action: action, TargetID: ptr(target), Details: []byte(`{}`), Now: f.clock.Now()}
}

func testSubmitAudit(t *testing.T, f *fixture) {
	c := f.conversation()
	p := f.submitParams(c.ID, 0)
	p.SubmittedBy, p.Audit = "alice", personAudit(f, "alice", "studio.operator.turn_submitted", p.RequestID)
	if _, _, err := f.s.SubmitTurn(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	rows := f.events("studio.operator.turn_submitted")
	if len(rows) != 1 || rows[0].Actor != "alice" || rows[0].TargetID == nil || *rows[0].TargetID != p.RequestID {
		t.Fatalf("audit rows = %+v, want one of alice for %s", rows, p.RequestID)
	}
	// A refused submit (stale expected sequence) leaves no row.
	q := f.submitParams(c.ID, 0)
	q.Audit = personAudit(f, "alice", "studio.operator.turn_submitted", q.RequestID)
	if _, _, err := f.s.SubmitTurn(f.ctx, q); err == nil {
		t.Fatal("a second submit while a turn is active was accepted")
	}
	if n := len(f.events("studio.operator.turn_submitted")); n != 1 {
		t.Fatalf("%d audit rows after a refused submit, want 1", n)
	}
}

func testAckAudit(t *testing.T, f *fixture) {
	c, tr := f.running()
	e := f.emit(c.ID, tr.RequestID)
	p := store.AckEffectParams{ID: e.ID, Status: store.EffectApplied, ClientRoute: ptr("/history"), Now: f.tick(),
		Audit: personAudit(f, "bob", "studio.operator.effect_acknowledged", e.ID)}
	f.ack(p)
	f.ack(p) // an identical repeat: no second row
	rows := f.events("studio.operator.effect_acknowledged")
	if len(rows) != 1 || rows[0].Actor != "bob" {
		t.Fatalf("audit rows = %+v, want one of bob", rows)
	}
}
