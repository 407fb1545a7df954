package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testPlaybookCreateGet(t *testing.T, f *fixture) {
	def := "tests"
	args := []store.PlaybookArg{{Name: "repo", Description: "the repo", Required: true}, {Name: "focus", Default: &def}}
	p := f.playbook("audit-repo", args...)
	byID, err := f.s.GetPlaybook(f.ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	byName, err := f.s.GetPlaybookByName(f.ctx, "audit-repo")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []store.Playbook{p, byID, byName} {
		if got.ID != p.ID || got.Name != "audit-repo" || got.Project != "studio" || got.Prompt != "do audit-repo" ||
			got.Description != "about audit-repo" || got.Version != 1 || !got.CreatedAt.Equal(got.UpdatedAt) {
			t.Fatalf("playbook = %+v", got)
		}
		if len(got.Args) != 2 || got.Args[0].Name != "repo" || !got.Args[0].Required || got.Args[0].Description != "the repo" ||
			got.Args[1].Default == nil || *got.Args[1].Default != "tests" || got.Args[1].Required {
			t.Fatalf("args = %+v", got.Args)
		}
	}
	bare := f.playbook("bare")
	if bare.Args == nil || len(bare.Args) != 0 {
		t.Fatalf("no args read back as %#v, want an empty list", bare.Args)
	}
}

func testPlaybookDuplicate(t *testing.T, f *fixture) {
	p := f.playbook("dup")
	_, err := f.s.CreatePlaybook(f.ctx, store.CreatePlaybookParams{ID: newID(), Project: "x", Name: "dup", Prompt: "p",
		Now: f.tick(), Audit: auditRow(f, "x")})
	pe := wantCode(t, err, protocol.Conflict)
	if pe.Details["id"] != p.ID {
		t.Fatalf("duplicate conflict details = %v, want the owner's id", pe.Details)
	}
	if n := len(f.events("studio.app.command")); n != 0 {
		t.Fatalf("a refused create appended %d audit rows", n)
	}
}

func testPlaybookMissing(t *testing.T, f *fixture) {
	_, err := f.s.GetPlaybook(f.ctx, newID())
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.GetPlaybookByName(f.ctx, "nope")
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: newID(), Prompt: ptr("x"), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: newID()})
	wantCode(t, err, protocol.NotFound)
}

func testPlaybookUpdate(t *testing.T, f *fixture) {
	p := f.playbook("one")
	f.playbook("two")
	now := f.tick()
	args := []store.PlaybookArg{{Name: "x"}}
	up, err := f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 1, Prompt: ptr("new prompt"),
		Args: &args, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if up.Version != 2 || up.Prompt != "new prompt" || up.Name != "one" || up.Description != "about one" ||
		len(up.Args) != 1 || !up.UpdatedAt.Equal(now) || !up.CreatedAt.Equal(p.CreatedAt) {
		t.Fatalf("updated = %+v", up)
	}
	// A stale version changes nothing.
	_, err = f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 1, Prompt: ptr("lost"), Now: f.tick()})
	wantVersionConflict(t, err, 1, 2)
	// The name of another playbook is taken.
	_, err = f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 2, Name: ptr("two"), Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	// Version 0 means no expectation.
	up, err = f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, Name: ptr("uno"), Now: f.tick()})
	if err != nil || up.Version != 3 || up.Name != "uno" || up.Prompt != "new prompt" {
		t.Fatalf("rename = %+v, %v", up, err)
	}
	if _, err := f.s.GetPlaybookByName(f.ctx, "one"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("old name still resolves: %v", err)
	}
}

func testPlaybookList(t *testing.T, f *fixture) {
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("pb-%02d", i)
		want = append(want, name)
		f.playbook(name)
	}
	var got []string
	after := ""
	for range 10 {
		page, err := f.s.ListPlaybooks(f.ctx, store.ListPlaybooksParams{AfterName: after, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			got = append(got, p.Name)
		}
		if len(page) < 7 {
			break
		}
		after = page[len(page)-1].Name
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged names = %v, want %v", got, want)
	}
	// Search is case-insensitive over name and description; % and _ are literal.
	f.playbook("release_notes")
	for _, tc := range []struct {
		q    string
		want int
	}{{"PB-1", 10}, {"about pb-2", 5}, {"_notes", 1}, {"%", 0}, {"nothing", 0}} {
		page, err := f.s.ListPlaybooks(f.ctx, store.ListPlaybooksParams{Query: tc.q, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != tc.want {
			t.Fatalf("query %q matched %d, want %d", tc.q, len(page), tc.want)
		}
	}
	other, err := f.s.CreatePlaybook(f.ctx, store.CreatePlaybookParams{ID: newID(), Project: "other", Name: "zz", Prompt: "p", Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	page, err := f.s.ListPlaybooks(f.ctx, store.ListPlaybooksParams{Project: "other"})
	if err != nil || len(page) != 1 || page[0].ID != other.ID {
		t.Fatalf("project filter = %+v, %v", page, err)
	}
}

func testPlaybookDelete(t *testing.T, f *fixture) {
	used := f.playbook("used")
	free := f.playbook("free")
	if _, err := f.s.CreateWorkflow(f.ctx, store.CreateWorkflowParams{ID: newID(), Project: "p", Name: "wf",
		Steps: []store.WorkflowStep{{PlaybookID: used.ID}}, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.CreateSchedule(f.ctx, store.CreateScheduleParams{ID: newID(), Project: "p", Name: "nightly", Cron: "0 2 * * *",
		PlaybookID: used.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: used.ID, Audit: auditRow(f, used.ID)})
	pe := wantCode(t, err, protocol.Conflict)
	users, _ := pe.Details["usedBy"].([]string)
	if !slices.Equal(users, []string{"schedule nightly", "workflow wf"}) {
		t.Fatalf("usedBy = %#v", pe.Details["usedBy"])
	}
	_, err = f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: free.ID, ExpectedVersion: 2})
	wantVersionConflict(t, err, 2, 1)
	if n := len(f.events("studio.app.command")); n != 0 {
		t.Fatalf("refused deletes appended %d audit rows", n)
	}
	gone, err := f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: free.ID, ExpectedVersion: 1, Audit: auditRow(f, free.ID)})
	if err != nil || gone.ID != free.ID || gone.Name != "free" {
		t.Fatalf("delete = %+v, %v", gone, err)
	}
	if _, err := f.s.GetPlaybook(f.ctx, free.ID); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("deleted playbook: %v", err)
	}
	if n := len(f.events("studio.app.command")); n != 1 {
		t.Fatalf("the delete appended %d audit rows, want 1", n)
	}
}
