package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The tests of issue 16's second phase: honest proposals (defects 6 and 7),
// turn progress (defect 8), and the depth of the spaces.

const depthScript = `{"turns":[
 {"match":"e2e-pause-paused","steps":[
   {"tool":"set_schedule_enabled","arguments":{"schedule":"nightly-audit","enabled":false}},
   {"text":"Checked."}]},
 {"match":"e2e-delete-schedule","steps":[
   {"tool":"delete_schedule","arguments":{"schedule":"nightly-audit"}},
   {"text":"Waiting for you."}]},
 {"match":"e2e-cancel-run","steps":[
   {"tool":"list_runs","arguments":{}},
   {"text":"Listed."}]},
 {"match":"e2e-launch","steps":[
   {"tool":"launch_playbook","arguments":{"playbook":"audit-repo","input":"from the dock","args":{"repo":"studio/operator"}}},
   {"text":"Waiting for you."}]},
 {"match":"e2e-busy","steps":[
   {"fail":{"code":"rate_limited","message":"slow down","retryable":true,"retryAfterMs":30000}}]},
 {"steps":[{"text":"ok"}]}]}`

// TestNoOpIsNeverProposed (defect 6, server side): whatever the model asks,
// the server refuses to make pausing a paused schedule a proposal; the
// dock shows the tool's answer, no card, and the schedule is unchanged.
func TestNoOpIsNeverProposed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, depthScript)
	var before struct{ Version int }
	appDo(t, d, "GET", "/api/app/schedules/nightly-audit", nil, &before)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-pause-paused")
	p.waitJS(`document.querySelector('.transcript .done') !== null`, "the turn's end")
	if n := eval[int](p, `document.querySelectorAll('.proposal').length`); n != 0 {
		t.Fatalf("a no-op became a proposal (%d cards)", n)
	}
	tool := eval[string](p, `document.querySelector('.transcript details.tool').textContent`)
	if !strings.Contains(tool, "failed (conflict)") || !strings.Contains(tool, `already paused; nothing to change`) {
		t.Fatalf("the tool row reads %q", tool)
	}
	var after struct{ Version int }
	appDo(t, d, "GET", "/api/app/schedules/nightly-audit", nil, &after)
	if after.Version != before.Version {
		t.Fatalf("the schedule moved from version %d to %d", before.Version, after.Version)
	}
}

// TestIrreversibleProposalAsksForTheName (defect 7): a delete is marked
// irreversible in red and in words, names its target, and enables Confirm
// only once the target's name is typed; a pause keeps the plain look.
func TestIrreversibleProposalAsksForTheName(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, depthScript)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-delete-schedule")
	p.waitJS(`document.querySelector('.proposal[data-state=required]') !== null`, "the proposal card")
	card := eval[string](p, `document.querySelector('.proposal').innerText`)
	for _, want := range []string{"Irreversible", "cannot be undone", "schedule nightly-audit"} {
		if !strings.Contains(strings.ToLower(card), strings.ToLower(want)) {
			t.Fatalf("the card lacks %q:\n%s", want, card)
		}
	}
	if !eval[bool](p, `document.querySelector('.proposal').classList.contains('impact-irreversible')`) {
		t.Fatal("the irreversible card looks like any other")
	}
	red := eval[string](p, `getComputedStyle(document.querySelector('.proposal')).borderLeftColor`)
	plain := eval[string](p, `(() => { const e = document.createElement('section'); e.className = 'proposal risk-mutate'; document.body.append(e); const c = getComputedStyle(e).borderLeftColor; e.remove(); return c; })()`)
	if red == plain {
		t.Fatalf("the irreversible card's border %s is the mutate colour", red)
	}
	if !eval[bool](p, `document.querySelector('.proposal button[data-action=confirm]').disabled`) {
		t.Fatal("Confirm is enabled before the name is typed")
	}
	p.do(chromedp.SendKeys(`.proposal input[data-typed-confirm]`, "nightly"))
	if !eval[bool](p, `document.querySelector('.proposal button[data-action=confirm]').disabled`) {
		t.Fatal("Confirm is enabled by a part of the name")
	}
	p.do(chromedp.SendKeys(`.proposal input[data-typed-confirm]`, "-audit"))
	p.waitJS(`!document.querySelector('.proposal button[data-action=confirm]').disabled`, "Confirm enabled by the typed name")
	p.shot("dock-proposal-irreversible")
	p.click(`.proposal button[data-action=confirm]`)
	p.waitJS(`document.querySelector('.proposal [data-result]') !== null`, "the result")
	if res := eval[string](p, `document.querySelector('.proposal [data-result]').dataset.result`); res != "succeeded" {
		t.Fatalf("result %q", res)
	}
	var list struct {
		Schedules []struct{ Name string } `json:"schedules"`
	}
	appDo(t, d, "GET", "/api/app/schedules", nil, &list)
	if len(list.Schedules) != 0 {
		t.Fatalf("the schedule is still there: %+v", list.Schedules)
	}
}

// TestDockShowsTurnProgress (defect 8): while the model is rate limited the
// dock says so, with the seconds to the next attempt, from the server's
// progress; cancelling clears it.
func TestDockShowsTurnProgress(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, depthScript)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-busy")
	p.waitJS(`document.querySelector('.turn-progress[data-progress=retrying]') !== null`, "the retrying progress")
	text := eval[string](p, `document.querySelector('.turn-progress').innerText`)
	if !strings.Contains(text, "rate limited; retrying in") || !strings.Contains(text, "(attempt 2)") {
		t.Fatalf("the progress line reads %q", text)
	}
	p.shot("dock-progress-retrying")
	// A reload learns the same from GET conversation (each retry waits 30 s:
	// three of them leave time for a reload on a loaded machine).
	// The marker tells the new document from the old one, which stays
	// complete and ready until the reload replaces it.
	eval[bool](p, `(window.__beforeReload = true, location.reload(), true)`)
	p.waitJS(`!window.__beforeReload && document.readyState === 'complete' && document.querySelector('#app') !== null && window.studio && window.studio.dock`, "the reloaded page")
	p.openDock()
	p.waitJS(`document.querySelector('.turn-progress[data-progress=retrying]') !== null`, "the retrying progress after a reload")
	p.click(`.composer button.danger`)
	p.waitJS(`document.querySelector('.turn-progress').hidden && document.querySelector('.transcript .done') !== null`, "the progress cleared by the turn's end")
}

// TestFleetSearchesOnTheServer: the fleet's search, counts and paging are
// the server's: a run older than the newest hundred is found by its input,
// the status chips count the range, and "Show older runs" pages with the
// cursor (the old browser-side filter saw only the newest 100 runs).
func TestFleetSearchesOnTheServer(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, depthScript)
	oldest := launch(t, d, "needle-in-the-haystack")
	for i := range 110 {
		launch(t, d, fmt.Sprintf("hay %d", i))
	}
	p := openPage(t, d, "/?view=fleet&q=needle")
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 1`, "the one matching run")
	if got := eval[string](p, `document.querySelector('.table tbody tr').dataset.key`); got != oldest {
		t.Fatalf("the search found %s, want %s", got, oldest)
	}
	if got := eval[string](p, `document.querySelector('[data-count=all]').innerText`); !strings.Contains(got, "1") {
		t.Fatalf("the All chip reads %q for one match", got)
	}
	p.do(chromedp.Navigate(d.URL + "/?view=fleet&range=24h"))
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 50 && document.querySelector('[data-more]') !== null`, "the first page of 50")
	all := eval[string](p, `document.querySelector('[data-count=all]').innerText`)
	if !strings.Contains(all, "111") {
		t.Fatalf("the All chip reads %q, want 111 runs in the range", all)
	}
	p.click(`[data-more]`)
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 100`, "the second page appended")
	p.shot("fleet-server-side")
	// The hourly chart's labels never overlap.
	p.do(chromedp.Navigate(d.URL + "/"))
	p.waitJS(`document.querySelectorAll('figure.chart-figure svg[role=img]').length === 3`, "three charts")
	overlaps := eval[int](p, `(() => {
		const ts = [...document.querySelectorAll('figure.chart-figure')[0].querySelectorAll('text.axis')].filter(t => t.textContent.includes(':')).map(t => t.getBoundingClientRect());
		let n = 0;
		for (let i = 1; i < ts.length; i++) if (ts[i].left < ts[i - 1].right + 2) n++;
		return n;
	})()`)
	if overlaps != 0 {
		t.Fatalf("%d hourly axis labels overlap their neighbour", overlaps)
	}
	if got := eval[string](p, `document.querySelectorAll('figure.chart-figure')[0].querySelector('svg desc').textContent`); !strings.Contains(got, "111 runs in the last 24 hours") {
		t.Fatalf("the hourly chart says %q", got)
	}
}

// TestWorkflowsLaunchAndDeleteInDesigner: a workflow launched from the
// Designer queues a run per step, shown by step and in the run detail; a
// delete asks first, then removes it and audits it.
func TestWorkflowsLaunchAndDeleteInDesigner(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, depthScript)
	var wf struct{ ID string }
	appDo(t, d, "POST", "/api/app/workflows", map[string]any{"name": "ship", "steps": []map[string]any{
		{"playbook": "audit-repo", "args": map[string]string{"repo": "a"}}, {"playbook": "write-release-notes", "args": map[string]string{"version": "v2"}}}}, &wf)
	p := openPage(t, d, "/designer?workflow="+wf.ID)
	p.click(`button[data-action=launch-workflow]`)
	p.waitJS(`document.querySelectorAll('.step-runs-list li[data-step] .list li').length === 2`, "a run for each step")
	p.shot("designer-runs-by-step")
	p.click(`.step-runs-list li[data-step="1"] .list a`)
	p.waitJS(`document.querySelector('[data-run-workflow]') !== null`, "the run detail naming its workflow")
	if got := eval[string](p, `document.querySelector('[data-run-workflow]').innerText`); !strings.Contains(got, "step 2") {
		t.Fatalf("the run detail says %q", got)
	}
	p.do(chromedp.Navigate(d.URL + "/designer?workflow=" + wf.ID))
	p.click(`button[data-action=delete-workflow]`)
	p.waitJS(`document.querySelector('dialog[open]') !== null`, "the delete confirmation")
	p.click(`dialog[open] button[value=ok]`)
	p.waitJS(`!location.search.includes('workflow=')`, "the deleted workflow closed")
	var list struct{ Workflows []struct{ Name string } }
	appDo(t, d, "GET", "/api/app/workflows", nil, &list)
	for _, w := range list.Workflows {
		if w.Name == "ship" {
			t.Fatal("the workflow is still there")
		}
	}
	var audit struct{ Events []struct{ Actor string } }
	appDo(t, d, "GET", "/api/app/audit?commandType=delete_workflow", nil, &audit)
	if len(audit.Events) != 1 || audit.Events[0].Actor != "owner" { // the token file's principal

		t.Fatalf("delete audit rows: %+v", audit.Events)
	}
}

// TestHistoryFiltersAndOperatorLinks: the audit trail filters on the
// server by command, actor and time, bound to the URL; an operator's row
// opens its conversation in the dock with the proposal in view.
func TestHistoryFiltersAndOperatorLinks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, depthScript)
	launch(t, d, "by hand")
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-launch")
	p.waitJS(`document.querySelector('.proposal[data-state=required] button[data-action=confirm]') !== null`, "the proposal card")
	conv := p.conversationID()
	p.click(`.proposal button[data-action=confirm]`)
	p.waitJS(`document.querySelector('.proposal [data-result]') !== null`, "the confirmation result")
	p.click(".dock-toggle") // close the dock
	p.do(chromedp.Navigate(d.URL + "/history?tab=audit&actor=studio_operator"))
	// The launch the application audited for the operator; the proposal's
	// confirmed and executed rows are the confirming principal's (owner).
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 1`, "the operator's row")
	if n := eval[int](p, `[...document.querySelectorAll('.table tbody tr')].filter(tr => !tr.innerText.includes('Launch playbook')).length`); n != 0 {
		t.Fatalf("%d rows of other commands", n)
	}
	// The action filter is a select bound to the URL.
	eval[bool](p, `(() => { const s = document.querySelector('select[name=action]'); s.value = 'cancel_run'; s.dispatchEvent(new Event('change')); return true; })()`)
	p.waitJS(`location.search.includes('action=cancel_run') && document.querySelector('.table') === null && document.querySelector('.list-pane .empty') !== null`, "no cancel_run rows")
	p.do(chromedp.Navigate(d.URL + "/history?tab=audit&action=launch_playbook"))
	// By hand, the proposal's confirmed and executed rows, the operator's launch.
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 4`, "the four launch rows")
	p.waitJS(`document.querySelector('[data-open-conversation]') !== null`, "the proposal row's link")
	if got := eval[string](p, `document.querySelector('[data-open-conversation]').dataset.openConversation`); got != conv {
		t.Fatalf("the row opens conversation %s, want %s", got, conv)
	}
	p.shot("history-audit-filtered")
	p.click(`[data-open-conversation]`)
	p.waitJS(`document.querySelector('#app').classList.contains('dock-open') && document.querySelector('.proposal.highlight') !== null`, "the dock open on the proposal")
	if got := p.conversationID(); got != conv {
		t.Fatalf("the dock shows %s, want %s", got, conv)
	}
	p.do(chromedp.Navigate(d.URL + "/system"))
	p.waitJS(`[...document.querySelectorAll('figure.chart-figure svg desc')].some(d => d.textContent.includes('turn'))`, "the operator charts")
	if got := eval[string](p, `document.querySelector('#operator-charts-title').closest('section').innerText`); !strings.Contains(got, "Turn latency") || !strings.Contains(got, "Model errors") {
		t.Fatalf("the System charts read %q", got)
	}
}
