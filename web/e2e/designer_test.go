package e2e_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
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

	// Someone else (alice) saves while the page holds unsaved edits: the
	// page keeps them and says who saved, at the form's top and in view,
	// with reload theirs, keep mine and see the difference.
	alice := addPrincipal(t, d, "alice", protocol.RoleOperator)
	const desc = `form[data-form=workflow] textarea[name=description]`
	p.setValue(desc, "mine")
	appDoAs(t, d, alice, "PATCH", "/api/app/workflows/"+created.ID, map[string]any{"expectedVersion": 4, "description": "theirs"}, nil)
	p.waitJS(`document.querySelector('[data-changed]')?.dataset.savedBy === 'alice'`, "the notice naming alice")
	if v := eval[string](p, `document.querySelector('`+desc+`').value`); v != "mine" {
		t.Fatalf("alice's save overwrote the edit in progress: %q", v)
	}
	if msg := eval[string](p, `document.querySelector('[data-changed]').innerText`); !strings.Contains(msg, "alice saved workflow ship") || !strings.Contains(msg, "v5") {
		t.Fatalf("the notice says %q", msg)
	}
	if !eval[bool](p, inViewJS+`(document.querySelector('[data-changed] [data-action=keep-mine]'))`) {
		t.Errorf("the notice's buttons are not in view")
	}
	p.shot("designer-changed-by-alice")
	p.click(`[data-changed] [data-action=see-difference]`)
	p.waitJS(`[...document.querySelectorAll('[data-diff] tbody tr')].some(tr => tr.innerText.includes('theirs') && tr.innerText.includes('mine'))`, "the difference: theirs beside mine")
	p.click(`[data-changed] [data-action=keep-mine]`)
	p.saveWorkflow(6)
	if got := getWorkflow(t, d, created.ID); got.Description != "mine" || got.Version != 6 {
		t.Fatalf("after keep mine and save the workflow is %+v", got)
	}

	// With nothing unsaved, alice's next save shows in place: the form and
	// the list follow it, without a reload.
	eval[bool](p, `(window.__sameDocument = true)`)
	appDoAs(t, d, alice, "PATCH", "/api/app/workflows/"+created.ID, map[string]any{"expectedVersion": 6, "description": "alice again"}, nil)
	p.waitJS(`document.querySelector('`+desc+`')?.value === 'alice again' && !document.querySelector('[data-changed]')`, "the form following alice's save")
	p.waitJS(`document.querySelector('.list-pane tr[data-key="`+created.ID+`"]')?.innerText.includes('v7')`, "the list at v7")
	if !eval[bool](p, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded")
	}

	// A save refused as a conflict (the change stream had not said yet):
	// the notice names alice and takes focus; Reload theirs shows hers.
	eval[bool](p, `(window.studio.live.stop(), true)`)
	p.setValue(desc, "late")
	appDoAs(t, d, alice, "PATCH", "/api/app/workflows/"+created.ID, map[string]any{"expectedVersion": 7, "description": "alice first"}, nil)
	p.click(`form[data-form=workflow] button[type=submit]`)
	p.waitJS(`document.querySelector('[data-changed]')?.dataset.savedBy === 'alice' && document.querySelector('[data-changed]').innerText.includes('refused')`, "the conflict naming alice")
	p.waitJS(`document.activeElement && document.activeElement.closest('[data-changed]') !== null`, "focus on the conflict notice")
	if !eval[bool](p, inViewJS+`(document.querySelector('[data-changed] [data-action=reload-theirs]'))`) {
		t.Errorf("the conflict's buttons are below the fold")
	}
	if got := getWorkflow(t, d, created.ID); got.Description != "alice first" || got.Version != 8 {
		t.Fatalf("after the conflict the workflow is %+v", got)
	}
	p.shot("designer-conflict")
	p.click(`[data-changed] [data-action=reload-theirs]`)
	p.waitJS(`document.querySelector('`+desc+`')?.value === 'alice first'`, "theirs, reloaded")
}

// TestDesignerAsksBeforeDroppingEdits: with unsaved edits, a reload is
// held by the browser's question, moving elsewhere in the cockpit (the
// rail, Back) asks, Stay keeps the edits, Leave drops them; the operator's
// navigation is refused rather than dropping them.
func TestDesignerAsksBeforeDroppingEdits(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	appDo(t, d, "POST", "/api/app/workflows", map[string]any{"name": "ship", "steps": []map[string]any{{"playbook": "audit-repo", "args": map[string]string{"repo": "a"}}}}, nil)
	p := openPage(t, d, "/library")
	p.click(`.rail-link[data-space=designer]`)
	p.click(`.list-pane a.row-link`)
	const desc = `form[data-form=workflow] textarea[name=description]`
	p.waitJS(`document.querySelector('`+desc+`') !== null`, "the workflow editor")
	// Unchanged, nothing asks.
	if eval[bool](p, `(() => { const ev = new Event('beforeunload', {cancelable: true}); dispatchEvent(ev); return ev.defaultPrevented; })()`) {
		t.Fatal("a reload asks with nothing unsaved")
	}
	p.setValue(desc, "unsaved words")
	if !eval[bool](p, `(() => { const ev = new Event('beforeunload', {cancelable: true}); dispatchEvent(ev); return ev.defaultPrevented; })()`) {
		t.Fatal("a reload would drop the unsaved edits without asking")
	}
	p.click(`.rail-link[data-space=library]`)
	p.waitJS(`document.querySelector('dialog[open]')?.innerText.includes('Leave without saving')`, "the question before leaving")
	p.shot("designer-leave-question")
	p.click(`dialog[open] button[value=cancel]`)
	p.waitJS(`location.pathname === '/designer' && document.querySelector('`+desc+`')?.value === 'unsaved words'`, "the edits kept after Stay")
	// Back: the address returns while the question is open; Stay keeps it.
	eval[bool](p, `(history.back(), true)`)
	p.waitJS(`document.querySelector('dialog[open]') !== null`, "the question on Back")
	p.click(`dialog[open] button[value=cancel]`)
	p.waitJS(`location.pathname === '/designer' && document.querySelector('`+desc+`')?.value === 'unsaved words'`, "the edits kept after Back and Stay")
	// The operator asks to move the page: refused, nothing lost.
	p.openDock()
	p.send("e2e-go-fleet")
	p.waitJS(`[...document.querySelectorAll('.effect-status[data-effect-status=rejected]')].some(e => e.innerText.includes('stale_context'))`, "the navigation refused over unsaved edits")
	if loc := p.location(); !strings.HasPrefix(loc, "/designer") {
		t.Fatalf("the operator's navigation moved the page to %s", loc)
	}
	p.click(".dock [data-action=close-dock]")
	// Leave: dropped on purpose.
	p.click(`.rail-link[data-space=library]`)
	p.waitJS(`document.querySelector('dialog[open]') !== null`, "the question again")
	p.click(`dialog[open] button[value=ok]`)
	p.waitJS(`location.pathname === '/library' && document.querySelector('dialog[open]') === null`, "the library after leaving")
}

// TestDesignerStepArguments: a step's argument names are its playbook's
// declared ones, picked from a list; an empty argument with a default says
// the default is saved; a required one left empty is refused when the
// workflow is saved (not at launch), the error counting steps as the form
// does ("Step 2") with that step marked.
func TestDesignerStepArguments(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	src := axeSource(t)
	p := openPage(t, d, "/designer")
	p.click(`.filters button.primary`)
	p.waitJS(`document.querySelector('form[data-form=workflow] .step-playbook option[value=audit-repo]') !== null`, "the new workflow form")
	p.setValue(`form[data-form=workflow] input[name=name]`, "needs-repo")
	p.setValue(`[data-step-edit]:nth-child(1) .step-playbook`, "summarize-failed-runs")
	p.click(`[data-action=add-step]`)
	p.setValue(`[data-step-edit]:nth-child(2) .step-playbook`, "audit-repo")
	p.waitJS(`document.querySelectorAll('[data-step-edit]:nth-child(2) .arg-row select.arg-name option').length >= 2`, "step 2's arguments")
	names := eval[[]string](p, `[...document.querySelectorAll('[data-step-edit]:nth-child(2) .arg-row')].map(r => r.querySelector('.arg-name').tagName + ':' + r.querySelector('.arg-name').value)`)
	if strings.Join(names, ",") != "SELECT:focus,SELECT:repo" && strings.Join(names, ",") != "SELECT:repo,SELECT:focus" {
		t.Fatalf("step 2's argument rows: %v", names)
	}
	if got := eval[string](p, `[...document.querySelectorAll('[data-step-edit]:nth-child(2) .arg-row')].find(r => r.dataset.arg === 'focus').querySelector('.arg-note').innerText`); !strings.Contains(got, "default") || !strings.Contains(got, "security") {
		t.Errorf("the empty focus argument says %q", got)
	}
	p.click(`form[data-form=workflow] button[type=submit]`)
	p.waitJS(`document.querySelector('form[data-form=workflow] .form-error')?.innerText.includes('Step 2')`, "the refusal naming step 2")
	msg := eval[string](p, `document.querySelector('form[data-form=workflow] .form-error').innerText`)
	if strings.Contains(msg, "steps[") || !strings.Contains(msg, "repo") {
		t.Errorf("the error reads %q", msg)
	}
	if !eval[bool](p, `document.querySelector('[data-step-edit]:nth-child(2)').classList.contains('has-error') && !document.querySelector('[data-step-edit]:nth-child(1)').classList.contains('has-error')`) {
		t.Errorf("step 2 is not the step marked")
	}
	p.axeCheck(src, "the Designer with a refused step")
	p.shot("designer-step-2-refused")
	var list struct{ Workflows []struct{ Name string } }
	appDo(t, d, "GET", "/api/app/workflows", nil, &list)
	if len(list.Workflows) != 0 {
		t.Fatalf("a refused workflow was saved: %+v", list.Workflows)
	}
	p.setArg(2, "repo", "acme/api")
	p.click(`form[data-form=workflow] button[type=submit]`)
	p.waitJS(`location.search.includes('workflow=')`, "the saved workflow")
}
