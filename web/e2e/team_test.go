package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/studio/operator/internal/protocol"
)

// The cockpit of a team: who is signed in, controls a role may not use
// disabled with the reason, four-eyes across two browsers, the admin page.

// slowRuns keeps every playbook run running (the script's only turn
// sleeps), so a run can be cancelled; conversations choose the offline
// model ("local"), which proposes "cancel run <id>".
const slowRuns = `{"turns":[{"steps":[{"text":"Audit started. "},{"sleepMs":600000}]}]}`

// addPrincipal creates a principal with a role through the admin API and
// returns a personal token of it.
func addPrincipal(t *testing.T, d *daemon, name string, role protocol.Role) string {
	t.Helper()
	if _, err := d.client.CreatePrincipal(ctxT(t), name, role); err != nil {
		t.Fatal(err)
	}
	tok, err := d.client.CreateToken(ctxT(t), name, "1d")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Token, "stu_") {
		t.Fatalf("token %q has no stu_ prefix", tok.Token)
	}
	return tok.Token
}

// TestFourEyesInTwoBrowsers: with --second-approver-for destructive, the
// owner's turn proposes cancelling a running run; the owner's own card
// says "waiting for another approver" with Confirm disabled and Deny
// allowed; an approver, bea, in another browser confirms it; it executes
// once, and both cards and the audit name who proposed and who decided.
func TestFourEyesInTwoBrowsers(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, slowRuns, "--second-approver-for", "destructive", "--provider", "local=offline")
	src := axeSource(t)
	beaToken := addPrincipal(t, d, "bea", protocol.RoleApprover)
	run := launch(t, d, "acme/api")
	title, local := "Four eyes", "local"
	conv, err := d.client.CreateConversation(ctxT(t), protocol.CreateConversationRequest{Title: &title})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.UpdateConversation(ctxT(t), conv.ID, protocol.UpdateConversationRequest{Model: &local}); err != nil {
		t.Fatal(err)
	}

	owner := openPage(t, d, "/")
	owner.waitJS(`document.querySelector('[data-identity] [data-me]')?.innerText === 'owner' && document.querySelector('[data-identity] .role-badge')?.innerText === 'admin'`, "the owner in the top bar")
	owner.openDock()
	owner.waitJS(`window.studio.dock.conv && window.studio.dock.conv.id === `+jsString(conv.ID), "the conversation in the dock")
	owner.send("cancel run " + run[:8])
	card := `.transcript .proposal[data-state=required]`
	owner.waitJS(`document.querySelector('`+card+`[data-waiting="another-approver"]') !== null`, "the author's card waiting for another approver")
	if !eval[bool](owner, `(() => { const c = document.querySelector('`+card+`');
		return c.querySelector('button[data-action=confirm]').disabled && !c.querySelector('button[data-action=deny]').disabled
			&& c.querySelector('[data-why]').innerText.includes('Waiting for another approver')
			&& c.querySelector('[data-people]').innerText.includes('owner'); })()`) {
		t.Fatalf("the author's card: %s", eval[string](owner, `document.querySelector('`+card+`').innerText`))
	}
	// Words, not codes: the exact command (which names the run's id) aside.
	if text := eval[string](owner, `(() => { const c = document.querySelector('`+card+`').cloneNode(true); c.querySelector('details.command').remove(); return c.innerText; })()`); strings.Contains(text, run) || strings.Contains(text, "EXECUTE") || strings.Contains(text, "DESTRUCTIVE") || strings.Contains(text, "cancel_run") || !strings.Contains(text, "audit-repo") {
		t.Errorf("the card shows the run's full id or a raw risk, or not its playbook:\n%s", text)
	}
	eval[bool](owner, `(document.querySelector('`+card+` [data-why]').scrollIntoView({block: 'end'}), true)`)
	owner.shot("team-four-eyes-author")
	owner.axeCheck(src, "the author's waiting card")
	owner.axeStrict(src, "the author's card and top bar", ".topbar", card+" .actions", card+" [data-people]")

	bea := openPageAs(t, d, "/", beaToken)
	bea.waitJS(`document.querySelector('[data-identity] [data-me]')?.innerText === 'bea' && document.querySelector('[data-identity] .role-badge')?.innerText === 'approver'`, "bea in the top bar")
	bea.openDock()
	bea.waitJS(`document.querySelector('`+card+` button[data-action=confirm]') !== null && !document.querySelector('`+card+` button[data-action=confirm]').disabled && document.querySelector('`+card+`').dataset.submittedBy === 'owner'`, "bea's confirmable card")
	if w := eval[string](bea, `document.querySelector('`+card+`').dataset.waiting || ''`); w != "" {
		t.Fatalf("bea's card waits (%q): she did not propose it", w)
	}
	bea.shot("team-four-eyes-approver")
	bea.axeCheck(src, "the approver's card")
	bea.click(card + ` button[data-action=confirm]`)
	bea.waitJS(`document.querySelector('.transcript .proposal[data-state=succeeded]') !== null`, "bea's confirm to execute")

	// Executed once: the run is cancelled, one executed row, bea on it.
	var r struct{ Status string }
	appDo(t, d, "GET", "/api/app/runs/"+run, nil, &r)
	if r.Status != "cancelled" {
		t.Fatalf("run status %q after the confirm, want cancelled", r.Status)
	}
	props, err := d.client.Proposals(ctxT(t), "")
	if err != nil || len(props) != 1 || props[0].SubmittedBy != "owner" || props[0].DecidedBy != "bea" {
		t.Fatalf("proposals = %+v, %v", props, err)
	}
	var audit struct {
		Events []struct {
			Actor   string
			Details map[string]any
		}
	}
	appDo(t, d, "GET", "/api/app/audit?limit=100", nil, &audit)
	executed := 0
	for _, e := range audit.Events {
		if e.Details["proposal_id"] == props[0].ID && e.Details["decision"] == "executed" {
			executed++
			if e.Actor != "bea" {
				t.Errorf("the executed row's actor is %q, want bea", e.Actor)
			}
		}
	}
	if executed != 1 {
		t.Fatalf("%d executed audit rows, want 1", executed)
	}

	// The author's card learns the outcome and who decided.
	owner.waitJS(`document.querySelector('.transcript .proposal[data-state=succeeded][data-decided-by=bea]') !== null`, "the author's card to show bea's decision")
	owner.shot("team-four-eyes-author-after")

	// The audit names who proposed and who decided.
	owner.click(`.rail-link[data-space=history]`)
	owner.click(`#tab-tab-audit`)
	owner.waitJS(`[...document.querySelectorAll('[data-who]')].some(w => w.innerText.includes('bea') && w.innerText.includes('proposed by owner'))`, "the audit's who column")
	if text := eval[string](owner, `document.querySelector('#space table').innerText`); strings.Contains(text, "cancel_run") || strings.Contains(text, "studio.app.seeded") {
		t.Errorf("the audit table shows raw codes:\n%s", text)
	}
	owner.shot("team-audit-who")

	// The run's detail says who launched it (the owner, through the API).
	owner.do(chromedp.Navigate(d.URL + "/history?run=" + run))
	owner.waitJS(`document.querySelector('[data-launched-by]')?.innerText.startsWith('Launched by owner')`, "who launched the run")
	if text := eval[string](owner, `document.querySelector('[data-audit-rows]')?.innerText || ''`); strings.Contains(text, "cancel_run") || strings.Contains(text, "studio_") || !strings.Contains(text, "by bea") {
		t.Errorf("the run's audit rows: %q", text)
	}
	owner.shot("team-run-launched-by")
}

// TestViewerSeesWhyControlsAreDisabled: a viewer signs in with a personal
// token; the top bar names it; a pending proposal's Confirm and Deny are
// disabled with "needs the operator role", the composer says why it is
// read only, and the spaces' changing controls are disabled with a note.
// Sign out returns to the sign-in form.
func TestViewerSeesWhyControlsAreDisabled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	src := axeSource(t)
	vicToken := addPrincipal(t, d, "vic", protocol.RoleViewer)
	var zero int64
	// First a finished turn that asked the cockpit to move (an effect),
	// then one whose launch proposal waits: the dock opens on the newest.
	nav := "Show the fleet"
	navConv, err := d.client.CreateConversation(ctxT(t), protocol.CreateConversationRequest{Title: &nav})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.SubmitTurn(ctxT(t), navConv.ID, protocol.TurnRequest{Instruction: "e2e-go-fleet", Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitTimeout); ; {
		done := false
		for _, f := range conversationFrames(t, d, navConv.ID) {
			done = done || f.Type == protocol.FrameDone
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the navigate turn did not end")
		}
		time.Sleep(pollEvery)
	}
	title := "Launch for review"
	conv, err := d.client.CreateConversation(ctxT(t), protocol.CreateConversationRequest{Title: &title})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.SubmitTurn(ctxT(t), conv.ID, protocol.TurnRequest{Instruction: "e2e-launch please", Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero}); err != nil {
		t.Fatal(err)
	}

	p := openSignedOut(t, d, "/library")
	if text := eval[string](p, `document.querySelector('form.signin').innerText`); !strings.Contains(text, "stu_") {
		t.Errorf("the sign-in form does not mention personal tokens:\n%s", text)
	}
	eval[bool](p, `(() => { const i = document.querySelector('form.signin input[type=password]'); i.value = `+jsString(vicToken)+`; i.form.requestSubmit(); return true; })()`)
	p.waitJS(`document.querySelector('[data-identity] [data-me]')?.innerText === 'vic'`, "vic in the top bar")
	p.waitJS(`document.querySelector('#space [data-read-only]') !== null && document.querySelector('#space button.primary')?.disabled`, "the library's held controls")
	if title := eval[string](p, `document.querySelector('#space button.primary').title`); !strings.Contains(title, "needs the operator role") && !strings.Contains(title, "Needs the operator role") {
		t.Errorf("the held button's reason = %q", title)
	}
	p.openDock()
	card := `.transcript .proposal[data-state=required]`
	p.waitJS(`document.querySelector('`+card+` [data-why]') !== null && !document.querySelector('`+card+` [data-why]').hidden`, "the card's reason")
	if !eval[bool](p, `(() => { const c = document.querySelector('`+card+`');
		return c.querySelector('button[data-action=confirm]').disabled && c.querySelector('button[data-action=deny]').disabled
			&& /needs the operator role; you are a viewer/.test(c.querySelector('[data-why]').innerText); })()`) {
		t.Fatalf("the viewer's card: %s", eval[string](p, `document.querySelector('`+card+`').innerText`))
	}
	if !eval[bool](p, `document.querySelector('.composer textarea').disabled && /needs the agent role/.test(document.querySelector('.composer').innerText)`) {
		t.Errorf("the composer does not say why it is read only: %s", eval[string](p, `document.querySelector('.composer').innerText`))
	}
	if !eval[bool](p, `!!document.querySelector('.risk-badge') && !/[A-Z]{4,}/.test(document.querySelector('.risk-badge').innerText)`) {
		t.Errorf("the risk badge shouts: %q", eval[string](p, `document.querySelector('.risk-badge').innerText`))
	}
	eval[bool](p, `(document.querySelector('`+card+` [data-why]').scrollIntoView({block: 'end'}), true)`)
	p.shot("team-viewer-disabled")
	p.axeCheck(src, "the viewer's cockpit")
	p.axeStrict(src, "the viewer's held controls", ".topbar", "#space", ".composer", card+" .actions")

	// The other conversation's effect: a viewer's browser does not apply
	// it (nor try to acknowledge it), and says why.
	eval[bool](p, `(() => { const s = document.querySelector('#dock-conv'); s.value = `+jsString(navConv.ID)+`; s.dispatchEvent(new Event('change')); return true; })()`)
	p.waitJS(`document.querySelector('.transcript .effect .effect-status')?.innerText.includes('not applied in this browser')`, "the effect row's reason")
	if loc := p.location(); loc != "/library" {
		t.Fatalf("a viewer's browser applied the effect: at %s", loc)
	}

	// No Team tab for a viewer.
	p.click(`.rail-link[data-space=system]`)
	p.waitJS(`document.querySelector('#tab-tab-health') !== null`, "System")
	if eval[bool](p, `document.querySelector('#tab-tab-team') !== null`) {
		t.Error("a viewer sees the Team tab")
	}
	p.click(`[data-action=sign-out]`)
	p.waitJS(`document.querySelector('form.signin input[type=password]') !== null`, "the sign-in form after Sign out")
	if tok := eval[string](p, `sessionStorage.getItem('studio.token') || ''`); tok != "" {
		t.Error("Sign out left the token in session storage")
	}
}

// TestAdminTeamPage: System → Team lists principals (a linked proxy user
// named; change a role, disable) and tokens (prefix, created, last used, expires); a new token
// is shown once; a webhook added on the page (its secret shown once) is on
// the server.
func TestAdminTeamPage(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	src := axeSource(t)
	addPrincipal(t, d, "vic", protocol.RoleViewer)
	if _, err := d.client.LinkPrincipal(ctxT(t), "vic", "Vic@Corp.Example"); err != nil {
		t.Fatal(err)
	}
	p := openPage(t, d, "/system?tab=team")
	p.waitJS(`document.querySelector('[data-principal=vic]') !== null && document.querySelector('[data-tokens]') !== null`, "the principals and tokens")
	if !eval[bool](p, `document.querySelector('[data-principal=vic] [data-proxy-user="vic@corp.example"]') !== null`) {
		t.Fatal("vic's row does not name its linked proxy user")
	}
	// Make vic an operator.
	eval[bool](p, `(() => { const s = document.querySelector('select[data-role-of=vic]'); s.value = 'operator'; s.dispatchEvent(new Event('change')); return true; })()`)
	p.waitJS(`document.querySelector('select[data-role-of=vic]')?.value === 'operator' && document.querySelector('.team-result')?.innerText.includes('vic is now operator')`, "vic's new role")
	who, err := d.client.ListPrincipals(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range who {
		if x.Name == "vic" && x.Role != protocol.RoleOperator {
			t.Fatalf("vic's role on the server is %s", x.Role)
		}
	}
	// A new token for vic, shown once.
	p.click(`[data-principal=vic] button[data-action=new-token]`)
	p.waitJS(`document.querySelector('dialog[open] select') !== null`, "the token dialog")
	p.click(`dialog[open] button[type=submit]`)
	p.waitJS(`document.querySelector('[data-new-token] input')?.value.startsWith('stu_')`, "the new token, shown once")
	p.waitJS(`document.querySelectorAll('[data-tokens] tbody tr').length >= 2`, "the token list with the new token")
	p.waitJS(`document.querySelector('[data-webhooks]')?.dataset.webhooks !== 'loading'`, "the webhooks section to settle")
	if hooks := eval[string](p, `document.querySelector('[data-webhooks]').dataset.webhooks`); hooks != "shown" {
		t.Fatalf("the webhooks section is %q, want shown", hooks)
	}
	// A webhook added on the page: its secret shown once, the webhook on
	// the server and in the list with its (empty) deliveries.
	const hookURL = "http://127.0.0.1:9/studio-hook"
	p.setValue(`[data-webhooks] input[type=url]`, hookURL)
	p.click(`[data-webhooks] form button[type=submit]`)
	p.waitJS(`document.querySelector('[data-new-secret] code')?.textContent.startsWith('whsec_')`, "the webhook's secret, shown once")
	p.waitJS(`document.querySelector('[data-webhook] .name')?.textContent === '`+hookURL+`' && document.querySelector('[data-webhook] .deliveries .loading') === null`, "the webhook in the list with its deliveries")
	hooks, err := d.client.ListWebhooks(ctxT(t))
	if err != nil || len(hooks) != 1 || hooks[0].URL != hookURL || len(hooks[0].Events) != 1 || hooks[0].Events[0] != "proposal.pending" {
		t.Fatalf("webhooks on the server %+v, %v; want one to %s for proposal.pending", hooks, err, hookURL)
	}
	p.shot("team-admin-page")
	p.axeCheck(src, "the team page")
	p.axeStrict(src, "the team page", ".topbar", "#panel-tab")
	// At a phone's width the identity and the tables stay usable.
	p.do(chromedp.EmulateViewport(390, 844))
	p.waitJS(`document.querySelector('[data-identity]').getBoundingClientRect().right <= window.innerWidth`, "the identity within the phone's width")
	// The principals' table is wider than a phone: it scrolls sideways
	// with the cue, and its frame stays within the screen.
	p.waitJS(`(() => { const f = document.querySelector('[data-principals]').closest('.table-frame'); return !!f && (f.dataset.scroll || '').includes('right') && f.getBoundingClientRect().right <= window.innerWidth; })()`, "the principals' table scrolling sideways with its cue")
	p.shot("team-admin-page-phone")
	p.do(chromedp.EmulateViewport(1440, 960))
}

// axeStrict runs axe-core on the parts of the page a selector names and
// fails on anything above minor (moderate included): the new screens are
// held to that; the whole page's older moderate findings are the layout
// work's.
func (p *page) axeStrict(src, where string, selectors ...string) {
	p.t.Helper()
	if !eval[bool](p, `typeof window.axe === 'object'`) {
		eval[bool](p, src+";\ntrue")
	}
	var sel []string
	for _, s := range selectors {
		sel = append(sel, jsString(s))
	}
	raw := eval[string](p, `axe.run({include: [`+strings.Join(sel, ",")+`].filter(s => document.querySelector(s)).map(s => [s])}, { resultTypes: ['violations'] }).then(r => JSON.stringify(r.violations
		.filter(v => v.impact !== 'minor')
		.map(v => v.id + ' (' + v.impact + '): ' + v.help + ' :: ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))))`)
	var vs []string
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		p.t.Fatal(err)
	}
	for _, v := range vs {
		p.t.Errorf("%s: axe %s", where, v)
	}
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
