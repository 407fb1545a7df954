package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// A cockpit as people meet it after some weeks: principals, playbooks,
// workflows, schedules, runs that succeeded and failed, conversations, a
// proposal waiting for a decision. The review tests look at every space
// with it, at a desk's, a tablet's and a phone's width.

// reviewScript: "e2e-launch" proposes launching audit-repo; a run whose
// input says e2e-fail fails with a long message; everything else answers.
const reviewScript = `{"turns":[
 {"match":"e2e-launch","steps":[
   {"tool":"launch_playbook","arguments":{"playbook":"audit-repo","input":"from the dock","args":{"repo":"studio/operator"}}},
   {"text":"Waiting for you."}]},
 {"match":"e2e-fail","steps":[{"fail":{"code":"model_failure","message":"the model provider answered 503 Service Unavailable three times in a row while the run was writing its report; nothing was saved","retryable":false}}]},
 {"steps":[{"text":"Done: nothing to report."}]}]}`

// reviewData is what seedReview made.
type reviewData struct {
	alice, bea, vic string // tokens
	runs            []string
	failed          []string
	conv            string // the conversation with a waiting proposal
	proposal        string
}

// appDoAs calls the application API with a principal's token.
func appDoAs(t *testing.T, d *daemon, token, method, path string, body, out any) {
	t.Helper()
	if err := apiclient.New(d.URL, token, nil).Do(ctxT(t), method, path, body, out); err != nil {
		t.Fatalf("%s %s as another principal: %v", method, path, err)
	}
}

// submitAs submits a turn as a principal and waits for its proposal (when
// wantProposal) or its end; it returns the proposal's id.
func submitAs(t *testing.T, d *daemon, token, convID, text string, wantProposal bool) string {
	t.Helper()
	c := apiclient.New(d.URL, token, nil)
	page, err := c.GetConversation(ctxT(t), convID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	last := page.LatestSequence
	if _, err := c.SubmitTurn(ctxT(t), convID, protocol.TurnRequest{Instruction: text, Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitTimeout); time.Now().Before(deadline); time.Sleep(pollEvery) {
		for _, f := range conversationFrames(t, d, convID) {
			if p, ok := f.Payload.(protocol.ProposalPayload); ok && wantProposal && f.Sequence > last {
				return p.Proposal.ID
			}
			if f.Type == protocol.FrameDone && !wantProposal && f.Sequence > last {
				return ""
			}
		}
	}
	t.Fatalf("the turn %q did not %s", text, map[bool]string{true: "propose", false: "end"}[wantProposal])
	return ""
}

// seedReview fills a daemon with a few weeks of work.
func seedReview(t *testing.T, d *daemon) reviewData {
	t.Helper()
	var r reviewData
	r.alice = addPrincipal(t, d, "alice", protocol.RoleOperator)
	r.bea = addPrincipal(t, d, "bea", protocol.RoleApprover)
	r.vic = addPrincipal(t, d, "vic", protocol.RoleViewer)
	appDo(t, d, "POST", "/api/app/playbooks", map[string]any{"name": "triage-backlog", "description": "Sort the week's new issues by urgency.",
		"prompt": "Triage {{team}}'s backlog: {{input}}", "args": []map[string]any{{"name": "team", "required": true}, {"name": "limit", "default": "50"}}}, nil)
	appDo(t, d, "POST", "/api/app/workflows", map[string]any{"name": "release", "description": "Audit, then write the notes.", "steps": []map[string]any{
		{"playbook": "audit-repo", "args": map[string]string{"repo": "acme/api"}}, {"playbook": "write-release-notes", "args": map[string]string{"version": "v2.4"}}}}, nil)
	appDoAs(t, d, r.alice, "POST", "/api/app/workflows", map[string]any{"name": "weekly-triage", "steps": []map[string]any{
		{"playbook": "triage-backlog", "args": map[string]string{"team": "platform"}}, {"playbook": "summarize-failed-runs"}}}, nil)
	appDo(t, d, "POST", "/api/app/schedules", map[string]any{"name": "weekday-morning-audit-of-the-api", "cron": "15 9 * * 1-5",
		"playbook": "audit-repo", "args": map[string]string{"repo": "acme/api"}, "enabled": true}, nil)
	for i := range 18 {
		r.runs = append(r.runs, launch(t, d, fmt.Sprintf("acme/service-%02d", i)))
	}
	for i := range 4 {
		r.failed = append(r.failed, launch(t, d, fmt.Sprintf("e2e-fail acme/legacy-%d", i)))
	}
	waitRunsEnded(t, d)
	for i, title := range []string{"Why did the nightly audit fail?", "Release notes for v2.4", "Clean up old schedules"} {
		c, err := d.client.CreateConversation(ctxT(t), protocol.CreateConversationRequest{Title: &title})
		if err != nil {
			t.Fatal(err)
		}
		submitAs(t, d, d.Token, c.ID, fmt.Sprintf("hello %d", i), false)
	}
	title := "Launch the audit of studio/operator"
	ac := apiclient.New(d.URL, r.alice, nil)
	c, err := ac.CreateConversation(ctxT(t), protocol.CreateConversationRequest{Title: &title})
	if err != nil {
		t.Fatal(err)
	}
	r.conv = c.ID
	r.proposal = submitAs(t, d, r.alice, c.ID, "e2e-launch please", true)
	return r
}

// reviewView is a space (or one of its tabs or details) on seeded data:
// where it is, and the condition that says it has loaded.
type reviewView struct{ name, path, ready string }

// views are every space with the seeded data in it.
func (r reviewData) views() []reviewView {
	rows := `document.querySelectorAll('#space tbody tr[data-key]').length > 0`
	return []reviewView{
		{"mission", "/", `document.querySelectorAll('figure.chart-figure').length === 3`},
		{"fleet", "/?view=fleet", rows},
		{"fleet-failed-run", "/?view=fleet&status=failed&run=" + r.failed[0], `document.querySelector('[data-audit-rows], .related .muted') !== null`},
		{"designer", "/designer?workflow=release", `document.querySelector('form[data-form=workflow] .arg-row select option') !== null`},
		{"library", "/library?playbook=triage-backlog", `document.querySelector('.detail h2') !== null`},
		{"history", "/history", rows},
		{"audit", "/history?tab=audit", rows},
		{"schedules", "/schedules?schedule=weekday-morning-audit-of-the-api", `document.querySelectorAll('.cron-next li').length === 5`},
		{"system", "/system", `document.querySelector('[data-open-inbox]') !== null`},
		{"system-appearance", "/system?tab=appearance", `document.querySelector('[data-time-zone] input') !== null`},
	}
}

// overflowJS lists what sticks out past the window's right edge (outside
// what scrolls sideways on purpose: tables, chart data, dialogs). A list
// box's options are left to their select, which clips them: Firefox gives
// each option a box as wide as its text, Chromium none.
const overflowJS = `(() => { const out = []; for (const e of document.querySelectorAll('#app *')) {
	const r = e.getBoundingClientRect(); if (r.width === 0 || r.height === 0) continue;
	if (e.closest('.table-wrap, .chart-data, dialog, .visually-hidden') || e.matches('option, optgroup')) continue;
	if (r.right > innerWidth + 1) out.push((e.tagName + '.' + (typeof e.className === 'string' ? e.className : '')).slice(0, 60) + ' ' + Math.round(r.left) + '–' + Math.round(r.right)); }
	return out.slice(0, 8); })()`

// TestEverySpaceAtThreeWidths: with a few weeks of data, every space and
// the approvals inbox at 1440, 800 and 390 px: nothing sticks out past the
// window (Mission included, at a phone's and a tablet's width), axe finds
// nothing moderate or worse, and each is photographed for a person to look at.
func TestEverySpaceAtThreeWidths(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, reviewScript)
	src := axeSource(t)
	data := seedReview(t, d)
	views := data.views()
	p := openPage(t, d, "/")
	for _, size := range []struct {
		name string
		w, h int64
	}{{"1440", 1440, 900}, {"800", 800, 1000}, {"390", 390, 844}} {
		p.viewport(size.w, size.h)
		for _, v := range views {
			eval[bool](p, `(window.studio.go(`+jsString(v.path)+`), true)`)
			p.waitJS(v.ready, v.name+" at "+size.name)
			p.waitJS(`!document.querySelector('#space .loading')`, v.name+" loaded at "+size.name)
			if over := eval[[]string](p, overflowJS); len(over) > 0 {
				t.Errorf("%s at %s px: past the window's edge: %s", v.name, size.name, strings.Join(over, "; "))
			}
			p.axeCheck(src, v.name+" at "+size.name)
			p.shot(fmt.Sprintf("review-%s-%s", size.name, v.name))
		}
		p.click(`[data-inbox]`)
		p.waitJS(`document.querySelector('dialog[open] [data-open-proposal]') !== null`, "the inbox at "+size.name)
		p.axeCheck(src, "the inbox at "+size.name)
		p.shot(fmt.Sprintf("review-%s-inbox", size.name))
		p.do(chromedpEscape())
		p.waitJS(`document.querySelector('dialog[open]') === null`, "the inbox closed")
	}
}

// chromedpEscape presses Escape.
func chromedpEscape() chromedp.Action[chromedp.Void] { return chromedp.KeyEvent(kb.Escape) }
