package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// scrollerJS finds what scrolls the fleet's table: its nearest scrolling
// ancestor, else the page.
const scrollerJS = `(() => { let n = document.querySelector('#space .table-wrap');
	for (; n; n = n.parentElement) { const s = getComputedStyle(n).overflowY; if ((s === 'auto' || s === 'scroll') && n.scrollHeight > n.clientHeight) return n; }
	return document.scrollingElement; })()`

// TestViewsUpdateLive: a run launched through the API (as the CLI does)
// appears in the open Fleet without a reload, with the page where the
// reader left it (scroll and selection); a schedule paused elsewhere shows
// paused in the open Schedules.
func TestViewsUpdateLive(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript)
	var ids []string
	for i := range 30 {
		ids = append(ids, launch(t, d, fmt.Sprintf("repo-%d", i)))
	}
	// Nothing queued or running when the page loads: the fleet's own
	// refresh of running runs has nothing to do, so only the live stream
	// can bring the new run in.
	waitRunsEnded(t, d)
	selected := ids[5]
	p := openPage(t, d, "/?view=fleet&run="+selected)
	p.waitJS(fmt.Sprintf(`document.querySelector('#space tr.selected[data-key=%q]') !== null`, selected), "the fleet with the selected run")
	p.waitJS(`window.studio.live ? window.studio.live.open : true`, "the live change stream")
	eval[bool](p, `(window.__sameDocument = true)`)
	top := eval[float64](p, `(() => { const s = `+scrollerJS+`; s.scrollTop = 120; return s.scrollTop; })()`)
	if top <= 0 {
		t.Fatalf("the fleet does not scroll (scrollTop %v): the test needs a longer list", top)
	}

	fresh := launch(t, d, "launched-from-the-cli")
	p.waitJS(fmt.Sprintf(`document.querySelector('#space tr[data-key=%q]') !== null`, fresh), "the new run in the fleet, without a reload")
	p.shot("fleet-live-update")
	if !eval[bool](p, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded")
	}
	if got := eval[float64](p, `(`+scrollerJS+`).scrollTop`); got != top {
		t.Fatalf("the fleet scrolled from %v to %v when the run came in", top, got)
	}
	if got := eval[string](p, `document.querySelector('#space tr.selected')?.dataset.key || ''`); got != selected {
		t.Fatalf("the selection moved to %q", got)
	}

	// Schedules: enabled elsewhere (the starter schedule is paused), shown
	// enabled here.
	p.click(`.rail-link[data-space=schedules]`)
	p.waitJS(`[...document.querySelectorAll('#space tr')].some((tr) => tr.innerText.includes('nightly-audit') && !tr.querySelector('input[role=switch]').checked)`, "the paused schedule")
	appDo(t, d, "POST", "/api/app/schedules/nightly-audit/enable", map[string]any{}, nil)
	p.waitJS(`[...document.querySelectorAll('#space tr')].some((tr) => tr.innerText.includes('nightly-audit') && tr.querySelector('input[role=switch]').checked)`, "the schedule shown enabled without a reload")
	p.shot("schedules-live-update")
	if !eval[bool](p, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded")
	}
}

// waitRunsEnded waits until no run is queued or running.
func waitRunsEnded(t *testing.T, d *daemon) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		var page struct{ Counts map[string]int }
		appDo(t, d, "GET", "/api/app/runs?counts=true&limit=1", nil, &page)
		if page.Counts["queued"]+page.Counts["running"] == 0 {
			return
		}
		time.Sleep(pollEvery)
	}
	t.Fatal("runs did not end")
}

// slowRunScript keeps a run whose input says e2e-slow-run running until it
// is cancelled; every other run and turn answers at once.
const slowRunScript = `{"turns":[
 {"match":"e2e-slow-run","steps":[{"sleepMs":600000},{"text":"never reached"}]},
 {"steps":[{"text":"ok"}]}]}`

// TestMissionRunningNowUpdatesLive: Mission's "Running now" shows a run
// started elsewhere while it runs, and drops it when it ends, without a
// reload; the counts and the activity charts say it too.
func TestMissionRunningNowUpdatesLive(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, slowRunScript)
	p := openPage(t, d, "/")
	p.waitJS(`document.querySelector('#space #active-title') && document.querySelector('#space #active-title').parentElement.innerText.includes('Nothing is running')`, "an empty Running now")
	p.waitJS(`window.studio.live ? window.studio.live.open : true`, "the live change stream")
	eval[bool](p, `(window.__sameDocument = true)`)
	id := launch(t, d, "e2e-slow-run")
	p.waitJS(fmt.Sprintf(`document.querySelector('#space [data-running] li[data-key=%q]') !== null`, id), "the run in Running now, without a reload")
	// The counts agree with the list.
	p.waitJS(`/running\s*1\b/.test(document.querySelector('#space .card.stat')?.innerText || '')`, "the 24-hour counts showing one running")
	p.waitJS(`(document.querySelector('#space .charts')?.innerText || '').includes('1 run in the last 24 hours')`, "the activity charts counting the run as the counts do")
	p.shot("mission-running-now-live")
	appDo(t, d, "POST", "/api/app/runs/"+id+"/cancel", map[string]any{}, nil)
	p.waitJS(`document.querySelector('#space #active-title').parentElement.innerText.includes('Nothing is running')`, "the cancelled run gone from Running now")
	if !eval[bool](p, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded")
	}
}

// TestEveryListAndDetailUpdatesLive: what changes elsewhere (the CLI,
// another person) shows in every open view without a reload: the
// Library's list and open playbook, the Designer's list, History's
// finished runs, the audit trail (the selected row stays selected) and
// System's counts.
func TestEveryListAndDetailUpdatesLive(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, slowRunScript)
	alice := addPrincipal(t, d, "alice", protocol.RoleOperator)
	p := openPage(t, d, "/library?playbook=audit-repo")
	p.waitJS(`document.querySelector('.detail h2')?.innerText === 'audit-repo'`, "the playbook's detail")
	p.waitJS(`window.studio.live ? window.studio.live.open : true`, "the live change stream")
	eval[bool](p, `(window.__sameDocument = true)`)
	same := func(where string) {
		t.Helper()
		if !eval[bool](p, `window.__sameDocument === true`) {
			t.Fatalf("%s: the page reloaded", where)
		}
	}

	// Library: a new playbook in the list, a new description in the open one.
	appDoAs(t, d, alice, "POST", "/api/app/playbooks", map[string]any{"name": "made-elsewhere", "prompt": "p"}, nil)
	p.waitJS(`[...document.querySelectorAll('.list-pane tbody tr')].some(tr => tr.innerText.includes('made-elsewhere'))`, "the new playbook in the list")
	var pb struct{ Version int }
	appDo(t, d, "GET", "/api/app/playbooks/audit-repo", nil, &pb)
	appDoAs(t, d, alice, "PATCH", "/api/app/playbooks/audit-repo", map[string]any{"expectedVersion": pb.Version, "description": "Described elsewhere."}, nil)
	p.waitJS(`document.querySelector('.detail')?.innerText.includes('Described elsewhere.')`, "the open playbook's new description")
	same("library")

	// Designer: a workflow made elsewhere.
	eval[bool](p, `(window.studio.go('/designer'), true)`)
	p.waitJS(`document.querySelector('.list-pane .empty, .list-pane table') !== null`, "the designer's list")
	appDoAs(t, d, alice, "POST", "/api/app/workflows", map[string]any{"name": "made-elsewhere", "steps": []map[string]any{{"playbook": "summarize-failed-runs"}}}, nil)
	p.waitJS(`[...document.querySelectorAll('.list-pane tbody tr')].some(tr => tr.innerText.includes('made-elsewhere'))`, "the new workflow in the list")
	same("designer")

	// History: a run that ends shows among the finished.
	eval[bool](p, `(window.studio.go('/history'), true)`)
	p.waitJS(`document.querySelector('.list-pane .empty, .list-pane table') !== null`, "the finished runs")
	done := launch(t, d, "quick")
	p.waitJS(`document.querySelector('.list-pane tr[data-key="`+done+`"]') !== null`, "the finished run, without a reload")
	same("history")

	// Audit: a selected row stays selected while new rows come in above it.
	eval[bool](p, `(window.studio.go('/history?tab=audit'), true)`)
	p.waitJS(`document.querySelectorAll('.list-pane tbody tr[data-key]').length > 0`, "the audit trail")
	first := eval[string](p, `document.querySelector('.list-pane tbody tr[data-key]').dataset.key`)
	eval[bool](p, `(window.studio.go('/history?tab=audit&event=`+first+`'), true)`)
	p.waitJS(`document.querySelector('.list-pane tr.selected')?.dataset.key === '`+first+`'`, "the selected audit row")
	eval[bool](p, `(window.__sameDocument = true)`)
	appDoAs(t, d, alice, "POST", "/api/app/schedules/nightly-audit/enable", map[string]any{}, nil)
	p.waitJS(`[...document.querySelectorAll('.list-pane tbody tr')].some(tr => tr.innerText.includes('alice') && tr.innerText.includes('schedule'))`, "alice's row at the top, without a reload")
	if got := eval[string](p, `document.querySelector('.list-pane tr.selected')?.dataset.key || ''`); got != first {
		t.Fatalf("the selection moved to %q", got)
	}
	same("audit")

	// System: the work in flight follows.
	eval[bool](p, `(window.studio.go('/system'), true)`)
	p.waitJS(`document.querySelector('[data-work]') !== null`, "the health report")
	slow := launch(t, d, "e2e-slow-run")
	p.waitJS(`/Running\s*1\b/.test(document.querySelector('[data-work]').innerText)`, "one running, without a reload")
	appDo(t, d, "POST", "/api/app/runs/"+slow+"/cancel", map[string]any{}, nil)
	p.waitJS(`/Running\s*0\b/.test(document.querySelector('[data-work]').innerText)`, "none running again")
	same("system")
}
