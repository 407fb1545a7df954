package storetest

import (
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testWorkflow(t *testing.T, f *fixture) {
	a, b := f.playbook("a"), f.playbook("b")
	w, err := f.s.CreateWorkflow(f.ctx, store.CreateWorkflowParams{ID: newID(), Project: "p", Name: "release", Description: "ship",
		Steps: []store.WorkflowStep{{PlaybookID: a.ID, Input: "first", Args: map[string]string{"k": "v"}}, {PlaybookID: b.ID}}, Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	byName, err := f.s.GetWorkflowByName(f.ctx, "release")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []store.Workflow{w, byName} {
		if got.Version != 1 || len(got.Steps) != 2 || got.Steps[0].PlaybookName != "a" || got.Steps[0].Input != "first" ||
			got.Steps[0].Args["k"] != "v" || got.Steps[1].PlaybookID != b.ID || got.Steps[1].PlaybookName != "b" {
			t.Fatalf("workflow = %+v", got)
		}
	}
	steps := []store.WorkflowStep{{PlaybookID: b.ID}}
	up, err := f.s.UpdateWorkflow(f.ctx, store.UpdateWorkflowParams{ID: w.ID, ExpectedVersion: 1, Steps: &steps, Now: f.tick()})
	if err != nil || up.Version != 2 || len(up.Steps) != 1 || up.Steps[0].PlaybookName != "b" || up.Description != "ship" {
		t.Fatalf("update = %+v, %v", up, err)
	}
	_, err = f.s.UpdateWorkflow(f.ctx, store.UpdateWorkflowParams{ID: w.ID, ExpectedVersion: 1, Name: ptr("x"), Now: f.tick()})
	wantVersionConflict(t, err, 1, 2)
	_, err = f.s.UpdateWorkflow(f.ctx, store.UpdateWorkflowParams{ID: newID(), Name: ptr("x"), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	list, err := f.s.ListWorkflows(f.ctx, store.ListWorkflowsParams{Query: "SHIP"})
	if err != nil || len(list) != 1 || len(list[0].Steps) != 1 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	// a is no longer used, b is.
	if _, err := f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: b.ID})
	wantCode(t, err, protocol.Conflict)
}

func testWorkflowUnknownPlaybook(t *testing.T, f *fixture) {
	a := f.playbook("a")
	_, err := f.s.CreateWorkflow(f.ctx, store.CreateWorkflowParams{ID: newID(), Project: "p", Name: "broken",
		Steps: []store.WorkflowStep{{PlaybookID: a.ID}, {PlaybookID: newID()}}, Now: f.tick(), Audit: auditRow(f, "w")})
	wantCode(t, err, protocol.NotFound)
	if _, err := f.s.GetWorkflowByName(f.ctx, "broken"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("half a workflow stayed: %v", err)
	}
	if n := len(f.events("studio.app.command")); n != 0 {
		t.Fatalf("audit rows of a failed create: %d", n)
	}
}
