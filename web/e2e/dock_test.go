package e2e_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The dock's honest proposals (no no-op is proposed, an irreversible one
// asks for the target's name) and its turn progress. dockScript also drives
// the spaces' server-side queries in spaces_test.go.

const dockScript = `{"turns":[
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

// TestNoOpIsNeverProposed (server side): whatever the model asks,
// the server refuses to make pausing a paused schedule a proposal; the
// dock shows the tool's answer, no card, and the schedule is unchanged.
func TestNoOpIsNeverProposed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript)
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

// TestIrreversibleProposalAsksForTheName: a delete is marked
// irreversible in red and in words, names its target, and enables Confirm
// only once the target's name is typed; a pause keeps the plain look.
func TestIrreversibleProposalAsksForTheName(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript)
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

// TestDockShowsTurnProgress: while the model is rate limited the
// dock says so, with the seconds to the next attempt, from the server's
// progress; cancelling clears it.
func TestDockShowsTurnProgress(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript)
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

// TestDockSendsWhileATurnRuns: the author keeps talking while a turn
// runs. "Send after this" waits behind it (the progress line says so) and
// runs once it ends; "Stop and send" cancels the running turn and runs.
func TestDockSendsWhileATurnRuns(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-busy")
	p.waitJS(`document.querySelector('.turn-progress[data-progress=retrying]') !== null`, "the running turn")
	if got := eval[string](p, `document.querySelector('.composer button[type=submit]').textContent`); got != "Send after this" {
		t.Fatalf("the send button reads %q while a turn runs", got)
	}
	p.do(chromedp.SendKeys(chromedp.CSS(".composer textarea"), "e2e-busy again\r"))
	p.waitJS(`document.querySelector('.turn-progress').dataset.waiting === '1'`, "the waiting message in the progress line")
	if text := eval[string](p, `document.querySelector('.turn-progress').innerText`); !strings.Contains(text, "then 1 message waits: “e2e-busy again”") {
		t.Fatalf("the progress line reads %q", text)
	}
	p.shot("dock-message-waiting")
	// The first turn is cancelled: the waiting one runs (and retries too).
	p.click(`.composer button.danger`)
	p.waitJS(`document.querySelectorAll('.transcript .done').length === 1 && document.querySelector('.turn-progress[data-progress=retrying]') !== null && document.querySelector('.turn-progress').dataset.waiting === '0'`, "the waiting turn running")
	// Stop and send: the running turn is cancelled and the new one answers.
	p.do(chromedp.SendKeys(chromedp.CSS(".composer textarea"), "anything else"))
	p.click(`.composer button[data-when-busy=interrupt]`)
	p.waitJS(`document.querySelectorAll('.transcript .done').length === 3 && !document.querySelector('.dock').classList.contains('turn-running')`, "the interrupting turn's end")
	users := eval[[]string](p, `[...document.querySelectorAll('.transcript .msg.user')].map(e => e.innerText.trim())`)
	if len(users) != 3 || !strings.Contains(users[1], "e2e-busy again") || !strings.Contains(users[2], "anything else") {
		t.Fatalf("the transcript's messages: %q", users)
	}
}
