package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testAdminEvents(t *testing.T, f *fixture) {
	type ev struct {
		action, target string
	}
	events := []ev{
		{"studio.operator.command", "p1"},
		{"studio.operator.command", "p2"},
		{"studio.maintenance", ""},
		{"studio.operator.command", "p1"},
		{"studio.maintenance", "p1"},
	}
	var appended []store.AdminEvent
	for i, e := range events {
		var target *string
		if e.target != "" {
			target = ptr(e.target)
		}
		details := jsontext.Value(fmt.Sprintf(`{"decision":"confirmed","n":%d}`, i))
		if i == 2 {
			details = nil
		}
		now := f.tick()
		got, err := f.s.AppendAdminEvent(f.ctx, store.AppendAdminEventParams{Actor: "studio_operator", Action: e.action, TargetID: target, Details: details, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID <= 0 || (i > 0 && got.ID <= appended[i-1].ID) {
			t.Fatalf("event %d has id %d after %v", i, got.ID, appended)
		}
		if got.Actor != "studio_operator" || got.Action != e.action || !sameTime(&got.CreatedAt, &now) || !slices.Equal(ptrSlice(got.TargetID), ptrSlice(target)) {
			t.Fatalf("event %d = %+v", i, got)
		}
		appended = append(appended, got)
	}
	all, err := f.s.ListAdminEvents(f.ctx, store.ListAdminEventsParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(events) {
		t.Fatalf("listed %d events, want %d", len(all), len(events))
	}
	for i, e := range all {
		want := appended[len(appended)-1-i]
		if e.ID != want.ID || e.Action != want.Action || !e.CreatedAt.Equal(want.CreatedAt) || !slices.Equal(ptrSlice(e.TargetID), ptrSlice(want.TargetID)) {
			t.Fatalf("event %d = %+v, want %+v (newest first)", i, e, want)
		}
		wantDetails := want.Details
		if len(wantDetails) == 0 {
			wantDetails = jsontext.Value(`{}`)
		}
		if !jsonEqual(t, e.Details, wantDetails) {
			t.Fatalf("event %d details = %s, want %s", i, e.Details, wantDetails)
		}
	}
	if !jsonEqual(t, appended[2].Details, []byte(`{}`)) {
		t.Fatalf("nil details stored as %s, want {}", appended[2].Details)
	}

	idsOf := func(es []store.AdminEvent) []int64 {
		out := make([]int64, len(es))
		for i, e := range es {
			out[i] = e.ID
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    store.ListAdminEventsParams
		want []int64
	}{
		{"action", store.ListAdminEventsParams{Action: "studio.operator.command"}, []int64{appended[3].ID, appended[1].ID, appended[0].ID}},
		{"target", store.ListAdminEventsParams{TargetID: "p1"}, []int64{appended[4].ID, appended[3].ID, appended[0].ID}},
		{"action and target", store.ListAdminEventsParams{Action: "studio.operator.command", TargetID: "p1"}, []int64{appended[3].ID, appended[0].ID}},
		{"limit", store.ListAdminEventsParams{Limit: 2}, []int64{appended[4].ID, appended[3].ID}},
		{"before", store.ListAdminEventsParams{BeforeID: appended[3].ID, Limit: 2}, []int64{appended[2].ID, appended[1].ID}},
		{"before, filtered", store.ListAdminEventsParams{Action: "studio.operator.command", BeforeID: appended[3].ID}, []int64{appended[1].ID, appended[0].ID}},
		{"no match", store.ListAdminEventsParams{Action: "nothing"}, []int64{}},
	} {
		got, err := f.s.ListAdminEvents(f.ctx, tc.p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(idsOf(got), tc.want) {
			t.Fatalf("%s: ids %v, want %v", tc.name, idsOf(got), tc.want)
		}
	}
}

// testAuditActors: the distinct actors of the trail, by name, each once,
// and a change logged per row (the audit's live view follows it).
func testAuditActors(t *testing.T, f *fixture) {
	actors, err := f.s.ListAuditActors(f.ctx, 10)
	if err != nil || len(actors) != 0 {
		t.Fatalf("a fresh store's actors: %v, %v", actors, err)
	}
	mark := f.changesAfter(0)
	var last int64
	for _, a := range []string{"studio_operator", "bea", "alice", "bea", "studio_cockpit", "alice"} {
		e, err := f.s.AppendAdminEvent(f.ctx, store.AppendAdminEventParams{Actor: a, Action: "studio.test", Now: f.tick()})
		if err != nil {
			t.Fatal(err)
		}
		last = e.ID
	}
	actors, err = f.s.ListAuditActors(f.ctx, 10)
	if want := []string{"alice", "bea", "studio_cockpit", "studio_operator"}; err != nil || !slices.Equal(actors, want) {
		t.Fatalf("actors = %v, %v; want %v", actors, err, want)
	}
	if actors, err = f.s.ListAuditActors(f.ctx, 2); err != nil || !slices.Equal(actors, []string{"alice", "bea"}) {
		t.Fatalf("two actors = %v, %v", actors, err)
	}
	after := 0
	if len(mark) > 0 {
		after = int(mark[len(mark)-1].Seq)
	}
	cs := f.changesAfter(int64(after))
	if len(cs) != 6 || cs[5].Type != store.ChangeAuditAppended || cs[5].ResourceID != fmt.Sprint(last) {
		t.Fatalf("changes after the audit rows: %v", changeList(cs))
	}
}

func testAppAudit(t *testing.T, f *fixture) {
	p := f.playbook("audited")
	if _, err := f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 1, Prompt: ptr("x"),
		Now: f.tick(), Audit: auditRow(f, p.ID)}); err != nil {
		t.Fatal(err)
	}
	// The same change again fails on its version: neither it nor its audit row stays.
	_, err := f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 1, Prompt: ptr("y"),
		Now: f.tick(), Audit: auditRow(f, p.ID)})
	wantCode(t, err, protocol.Conflict)
	es := f.events("studio.app.command")
	if len(es) != 1 || es[0].TargetID == nil || *es[0].TargetID != p.ID || es[0].Actor != "studio_cockpit" {
		t.Fatalf("audit rows = %+v, want exactly the successful update's", es)
	}
	// Each mutating call commits its audit row.
	pb2 := f.playbook("second")
	r, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: pb2.ID, Trigger: store.TriggerManual, Now: f.tick(), Audit: auditRow(f, pb2.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.CancelRun(f.ctx, store.CancelRunParams{ID: r.ID, Now: f.tick(), Audit: auditRow(f, r.ID)}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.events("studio.app.command")); n != 3 {
		t.Fatalf("%d audit rows, want 3", n)
	}
}
