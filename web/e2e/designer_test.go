package e2e_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The Designer edits a workflow's steps whole (playbook, input, every
// argument, order, add and remove), saves only what changed with the
// version it read, and shows a conflict when someone else saved first.

type wfStep struct {
	PlaybookName string            `json:"playbookName"`
	Input        string            `json:"input"`
	Args         map[string]string `json:"args"`
}

type wfView struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Version     int      `json:"version"`
	Steps       []wfStep `json:"steps"`
}

func getWorkflow(t *testing.T, d *daemon, id string) wfView {
	t.Helper()
	var w wfView
	appDo(t, d, "GET", "/api/app/workflows/"+id, nil, &w)
	for i := range w.Steps {
		if w.Steps[i].Args == nil {
			w.Steps[i].Args = map[string]string{}
		}
	}
	return w
}

// setValue types a value into a field the way a person's edit reaches the
// page: the value, then input and change events.
func (p *page) setValue(sel, value string) {
	p.t.Helper()
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, sel, value)
	if !eval[bool](p, js) {
		p.t.Fatalf("no field %s", sel)
	}
}

// setArg sets the value of a step's argument row by the argument's name.
func (p *page) setArg(step int, name, value string) {
	p.t.Helper()
	row := fmt.Sprintf(`[...document.querySelectorAll('[data-step-edit]:nth-child(%d) .arg-row')].find((r) => r.querySelector('.arg-name').value === %q)`, step, name)
	p.waitJS(row, fmt.Sprintf("step %d's argument %s", step, name))
	js := fmt.Sprintf(`(() => { const el = %s.querySelector('.arg-value'); el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, row, value)
	eval[bool](p, js)
}

// saveWorkflow submits the Designer's form and waits for the page to show
// the version after it.
func (p *page) saveWorkflow(version int) {
	p.t.Helper()
	p.click(`form[data-form=workflow] button[type=submit]`)
	p.waitJS(fmt.Sprintf(`document.querySelector('form[data-form=workflow]') && document.querySelector('form[data-form=workflow]').innerText.includes('v%d ·')`, version),
		fmt.Sprintf("the saved workflow at v%d", version))
}

func TestDesignerEditsStepsWholeAndShowsConflicts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript)
	var created struct{ ID string }
	appDo(t, d, "POST", "/api/app/workflows", map[string]any{"name": "ship", "description": "before", "steps": []map[string]any{
		{"playbook": "audit-repo", "input": "repo a", "args": map[string]string{"repo": "a", "focus": "security"}},
		{"playbook": "write-release-notes", "args": map[string]string{"version": "v2"}}}}, &created)
	before := getWorkflow(t, d, created.ID)

	p := openPage(t, d, "/designer?workflow="+created.ID)
	p.waitJS(`document.querySelector('form[data-form=workflow] textarea[name=description]') !== null`, "the workflow editor")

	// Only the description changes: the steps keep their inputs and arguments.
	p.setValue(`form[data-form=workflow] textarea[name=description]`, "after")
	p.saveWorkflow(2)
	got := getWorkflow(t, d, created.ID)
	if got.Description != "after" || !reflect.DeepEqual(got.Steps, before.Steps) {
		t.Fatalf("after a description-only save: description %q, steps %+v; want \"after\" and the steps unchanged %+v", got.Description, got.Steps, before.Steps)
	}
	// And the save sent only the description (the audit row keeps the command).
	var audit struct {
		Events []struct {
			Details json.RawMessage `json:"details"`
		} `json:"events"`
	}
	appDo(t, d, "GET", "/api/app/audit?commandType=update_workflow", nil, &audit)
	if len(audit.Events) != 1 || strings.Contains(string(audit.Events[0].Details), `"steps"`) || strings.Contains(string(audit.Events[0].Details), `"name":"ship"`) {
		t.Fatalf("the update's audit rows: %s", audit.Events)
	}

	// Every part of a step: an argument's value, the order, a new step with
	// its input and argument, then a removal.
	p.waitJS(`document.querySelectorAll('[data-step-edit]').length === 2`, "two steps in the editor")
	p.setArg(2, "version", "v3")
	p.click(`[data-step-edit]:nth-child(2) [data-action=step-up]`)
	p.click(`[data-action=add-step]`)
	p.setValue(`[data-step-edit]:nth-child(3) .step-playbook`, "audit-repo")
	p.setValue(`[data-step-edit]:nth-child(3) .step-input`, "again")
	// The playbook's declared argument (repo) gets a row of its own.
	p.setArg(3, "repo", "b")
	p.shot("designer-step-editor")
	p.saveWorkflow(3)
	// The server fills in the defaults of arguments a step leaves unset.
	var pb struct {
		Args []struct{ Name, Default string }
	}
	appDo(t, d, "GET", "/api/app/playbooks/audit-repo", nil, &pb)
	audience, focus := before.Steps[1].Args["audience"], ""
	for _, a := range pb.Args {
		if a.Name == "focus" {
			focus = a.Default
		}
	}
	want := []wfStep{
		{"write-release-notes", "", map[string]string{"version": "v3", "audience": audience}},
		{"audit-repo", "repo a", map[string]string{"repo": "a", "focus": "security"}},
		{"audit-repo", "again", map[string]string{"repo": "b", "focus": focus}},
	}
	if got := getWorkflow(t, d, created.ID); !reflect.DeepEqual(got.Steps, want) {
		t.Fatalf("steps after editing: %+v, want %+v", got.Steps, want)
	}
	p.waitJS(`document.querySelectorAll('[data-step-edit]').length === 3`, "three steps in the editor")
	p.click(`[data-step-edit]:nth-child(1) [data-action=remove-step]`)
	p.saveWorkflow(4)
	if got := getWorkflow(t, d, created.ID); !reflect.DeepEqual(got.Steps, want[1:]) {
		t.Fatalf("steps after removing the first: %+v, want %+v", got.Steps, want[1:])
	}

	// Someone else saves first: the page's save is a conflict it shows, with
	// a reload; their change stays.
	appDo(t, d, "PATCH", "/api/app/workflows/"+created.ID, map[string]any{"expectedVersion": 4, "description": "theirs"}, nil)
	p.setValue(`form[data-form=workflow] textarea[name=description]`, "mine")
	p.click(`form[data-form=workflow] button[type=submit]`)
	p.waitJS(`document.querySelector('[data-conflict]') !== null`, "the conflict notice")
	if msg := eval[string](p, `document.querySelector('[data-conflict]').innerText`); !strings.Contains(msg, "Someone else saved") || !strings.Contains(msg, "v5") {
		t.Fatalf("the conflict says %q", msg)
	}
	p.shot("designer-conflict")
	if got := getWorkflow(t, d, created.ID); got.Description != "theirs" || got.Version != 5 {
		t.Fatalf("after the conflict the workflow is %+v", got)
	}
	p.click(`[data-action=reload-workflow]`)
	p.waitJS(`document.querySelector('form[data-form=workflow] textarea[name=description]') && document.querySelector('form[data-form=workflow] textarea[name=description]').value === 'theirs'`, "the reloaded workflow")
}
