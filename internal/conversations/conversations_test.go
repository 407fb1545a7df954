package conversations_test

import (
	"context"
	"testing"
	"time"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite/sqlitetest"
	"github.com/studio/operator/internal/store/storetest"
)

// engine is a stand-in for the turn engine: what the service asks of it,
// recorded.
type engine struct {
	views    *conversations.Views
	progress *protocol.TurnProgress
	asked    []string // conversations whose progress was asked
	models   map[string]bool
}

func (e *engine) TurnProgress(_ context.Context, conv store.Conversation) *protocol.TurnProgress {
	e.asked = append(e.asked, conv.ID)
	return e.progress
}

func (e *engine) CheckModel(name string) error {
	if !e.models[name] {
		return protocol.Errorf(protocol.Validation, "model %q is not configured", name).With("field", "model")
	}
	return nil
}

func (e *engine) LiveViews() *conversations.Views { return e.views }

func newService(t *testing.T) (*conversations.Service, *engine, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch)
	st := sqlitetest.Open(t, clock.Now())
	e := &engine{views: conversations.NewViews(), models: map[string]bool{"big": true}}
	return conversations.New(conversations.Config{Store: st, Engine: e, Now: clock.Now}), e, clock
}

// A view report lands in the views the engine's turns read; an older one
// changes nothing; one from a clock ahead of the daemon's counts as now.
func TestReportViewWritesTheEnginesViews(t *testing.T) {
	t.Parallel()
	s, e, clock := newService(t)
	ctx := t.Context()
	c, err := s.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	report := func(space string, at time.Time) protocol.ViewAccepted {
		t.Helper()
		a, err := s.ReportView(ctx, c.ID, protocol.ViewReport{ContextSnapshot: protocol.ContextSnapshot{Space: space, Route: "/"},
			ObservedAt: protocol.Timestamp(at)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	now := clock.Now()
	if a := report("history", now.Add(-time.Second)); !a.Accepted {
		t.Fatalf("first report refused: %+v", a)
	}
	if a := report("mission", now.Add(-2*time.Second)); a.Accepted {
		t.Fatalf("older report accepted: %+v", a)
	}
	view, at, ok := e.views.Latest(c.ID)
	if !ok || view.Space != "history" || !at.Equal(now.Add(-time.Second)) {
		t.Fatalf("engine's views hold %+v at %v (%v), want history", view, at, ok)
	}
	if a := report("mission", now.Add(time.Hour)); !a.Accepted || a.ObservedAt != protocol.Timestamp(now) {
		t.Fatalf("report from a clock ahead: %+v, want accepted at now", a)
	}
}

// A page carries the active turn's progress as the engine reports it; a
// model choice is checked by the engine, and clearing it is not.
func TestServiceAsksTheEngine(t *testing.T) {
	t.Parallel()
	s, e, _ := newService(t)
	ctx := t.Context()
	c, err := s.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e.progress = &protocol.TurnProgress{RequestID: "r", State: protocol.ProgressWorking}
	page, err := s.Page(ctx, c.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if page.ActiveTurn == nil || page.ActiveTurn.RequestID != "r" || len(e.asked) != 1 || e.asked[0] != c.ID {
		t.Fatalf("page's active turn %+v, engine asked for %v", page.ActiveTurn, e.asked)
	}
	nope, big, none := "nope", "big", ""
	if _, err := s.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Model: &nope}); protocol.CodeOf(err) != protocol.Validation {
		t.Fatalf("unknown model: %v, want validation", err)
	}
	for _, m := range []*string{&big, &none} {
		if got, err := s.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Model: m}); err != nil {
			t.Fatalf("model %q: %v", *m, err)
		} else if (got.Model == nil) != (*m == "") {
			t.Fatalf("model %q: conversation's model %v", *m, got.Model)
		}
	}
}

// Another principal's private conversation is not_found for every reader
// of the service, as a missing one; its owner and an admin see it.
func TestPrivateConversationIsNotFoundForOthers(t *testing.T) {
	t.Parallel()
	s, _, _ := newService(t)
	as := func(name string, role protocol.Role) context.Context {
		return protocol.WithPrincipal(t.Context(), protocol.Principal{ID: name, Name: name, Role: role})
	}
	private := protocol.VisibilityPrivate
	c, err := s.CreateConversation(as("ann", protocol.RoleOperator), protocol.CreateConversationRequest{Visibility: &private})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Page(as("bob", protocol.RoleOperator), c.ID, 0, 10); protocol.CodeOf(err) != protocol.NotFound {
		t.Fatalf("bob's page: %v, want not_found", err)
	}
	list, err := s.ListConversations(as("bob", protocol.RoleOperator), conversations.ListQuery{})
	if err != nil || len(list.Conversations) != 0 {
		t.Fatalf("bob's list: %+v, %v; want empty", list.Conversations, err)
	}
	for _, who := range []context.Context{as("ann", protocol.RoleOperator), as("root", protocol.RoleAdmin)} {
		if _, err := s.Page(who, c.ID, 0, 10); err != nil {
			t.Fatal(err)
		}
	}
}
