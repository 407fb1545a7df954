package e2e_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// TestDirectDeleteSentForApproval: with --second-approver-for
// destructive, alice deletes a schedule from its detail; the cockpit says
// "Sent for approval: waiting for another approver" (not an error) and
// the schedule stays; her own card offers to withdraw it; bea finds the
// request in her approvals inbox, titled by the schedule's name as a
// model's proposal is, opens it in the dock — a card that says alice
// requested it (no turn proposed it) and a composer that offers no
// cancel of a turn — confirms it, and it executes once; the audit names
// alice as the requester and bea as the decider.
func TestDirectDeleteSentForApproval(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, `{"turns":[{"steps":[{"text":"ok"}]}]}`, "--second-approver-for", "destructive")
	src := axeSource(t)
	alice := addPrincipal(t, d, "alice", protocol.RoleOperator)
	bea := addPrincipal(t, d, "bea", protocol.RoleOperator)

	p := openPageAs(t, d, "/", alice)
	eval[bool](p, `(window.studio.go('/schedules?schedule=nightly-audit'), true)`)
	p.waitJS(`document.querySelector('[data-action=edit-schedule]') !== null`, "the schedule's detail")
	p.click(`section.detail .actions button.danger`)
	p.waitJS(`document.querySelector('dialog[open] button[value=ok]') !== null`, "the delete dialog")
	p.click(`dialog[open] button[value=ok]`)
	sent := `section.detail .form-error[data-sent-for-approval]`
	p.waitJS(`document.querySelector('`+sent+`')?.innerText === 'Sent for approval: waiting for another approver'`, "the cockpit saying it was sent for approval")
	p.axeCheck(src, "a schedule sent for approval")
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {800, 900}, {390, 844}} {
		p.do(chromedp.EmulateViewport(size.w, size.h))
		eval[bool](p, `(document.querySelector('`+sent+`').scrollIntoView({block: 'center'}), true)`)
		p.shot(fmt.Sprintf("sent-for-approval-%d", size.w))
	}
	var sc struct{ ID string }
	appDo(t, d, "GET", "/api/app/schedules/nightly-audit", nil, &sc) // still there
	pending, err := d.client.Proposals(ctxT(t), "pending")
	if err != nil || len(pending) != 1 || pending[0].SubmittedBy != "alice" || pending[0].CommandType != "delete_schedule" {
		t.Fatalf("pending proposals %+v, %v", pending, err)
	}
	prop := pending[0]
	if prop.Origin != protocol.ProposalOriginRequest || prop.Summary != `Delete schedule "nightly-audit"` {
		t.Fatalf("the request's origin %q and summary %q", prop.Origin, prop.Summary)
	}
	card := `.transcript .proposal[data-proposal="` + prop.ID + `"]`

	// Alice's own request: hers to withdraw, another's to confirm.
	p.openDock()
	p.setValue(`#dock-conv`, prop.ConversationID)
	p.waitJS(`document.querySelector('`+card+` [data-people]')?.innerText === 'Approval requested by alice.'`, "alice's card saying she requested it")
	p.waitJS(`document.querySelector('`+card+` button[data-action=deny]').innerText === 'Withdraw request' && document.querySelector('`+card+` button[data-action=confirm]').disabled`, "alice's card offering to withdraw")
	eval[bool](p, `(document.querySelector('`+card+`').scrollIntoView({block: 'start'}), true)`)
	p.shot("sent-for-approval-requester-card")

	b := openPageAs(t, d, "/", bea)
	b.waitJS(`document.querySelector('[data-inbox-count]')?.dataset.inboxCount === '1'`, "bea's inbox counting the request")
	b.click(`[data-inbox]`)
	b.waitJS(`document.querySelector('dialog[open] [data-open-proposal="`+prop.ID+`"]') !== null`, "the request in bea's inbox")
	if item := eval[string](b, `document.querySelector('dialog[open] .inbox-item').innerText`); !strings.Contains(item, `Delete schedule "nightly-audit"`) || strings.Contains(item, prop.Target.ID) || !strings.Contains(item, "requested by alice") {
		t.Errorf("the inbox item does not name the schedule and its requester:\n%s", item)
	}
	b.shot("sent-for-approval-inbox")
	b.click(`dialog[open] [data-open-proposal="` + prop.ID + `"]`)
	b.waitJS(`document.querySelector('`+card+` input[data-typed-confirm]') !== null && !document.querySelector('`+card+` input[data-typed-confirm]').disabled`, "bea's card asking for the schedule's name")
	b.waitJS(`document.querySelector('`+card+` [data-people]').innerText === 'Approval requested by alice.'`, "bea's card saying alice requested it")
	if got := eval[string](b, `document.querySelector('`+card+` .proposal-summary').innerText`); got != `Delete schedule "nightly-audit"` {
		t.Errorf("bea's card is titled %q", got)
	}
	if txt := eval[string](b, `document.querySelector('`+card+`').innerText`); strings.Contains(txt, "in a turn") {
		t.Errorf("bea's card speaks of a turn:\n%s", txt)
	}
	// No model turn to stop: the card's Confirm and Deny are the choices.
	b.waitJS(`document.querySelector('.dock').classList.contains('turn-running') && document.querySelector('.composer textarea').placeholder.startsWith('An approval request above waits') && document.querySelector('.dock [data-progress]').innerText === 'Waiting for a decision on the approval request'`, "bea's composer and progress line saying the request waits")
	if shown := eval[[]string](b, `[...document.querySelectorAll('.composer button')].filter(x => !x.hidden).map(x => x.innerText)`); fmt.Sprint(shown) != "[Send after this]" {
		t.Errorf("bea's composer offers %q while the request waits, want only Send after this", shown)
	}
	if got := eval[string](b, `document.querySelector('`+card+` button[data-action=deny]').innerText`); got != "Deny" {
		t.Errorf("bea's Deny reads %q", got)
	}
	b.setValue(card+` input[data-typed-confirm]`, "nightly-audit")
	b.waitJS(`!document.querySelector('`+card+` button[data-action=confirm]').disabled`, "bea's confirmable card")
	// Bea's amendment would be her own request: Edit says it goes for approval.
	if got := eval[string](b, `document.querySelector('`+card+` button[data-action=amend]').innerText`); got != "Edit and send for approval" {
		t.Errorf("bea's Edit reads %q, want it to say the amendment is sent for approval", got)
	}
	row := `document.querySelector('#dock-conv option[value="` + prop.ConversationID + `"]')`
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {800, 900}, {390, 844}} {
		b.do(chromedp.EmulateViewport(size.w, size.h))
		eval[bool](b, `(document.querySelector('`+card+`').scrollIntoView({block: 'start'}), true)`)
		// The request's row: its title as much as fits, the count and the time whole.
		b.waitJS(row+`?.dataset.waiting === '1'`, "the request's row counting it")
		if cut := eval[[]string](b, convRowsCutJS); len(cut) > 0 {
			t.Errorf("at %d px the conversation list cuts rows: %q", size.w, cut)
		}
		if tip := eval[string](b, row+`.title`); !strings.HasPrefix(tip, `Approval request: Delete schedule "nightly-audit" · 1 waiting for a decision, last active `) {
			t.Errorf("the request's row's tooltip is %q, want the whole title first", tip)
		}
		b.shot(fmt.Sprintf("sent-for-approval-approver-card-%d", size.w))
	}
	b.do(chromedp.EmulateViewport(1440, 900))
	b.click(card + ` button[data-action=confirm]`)
	b.waitJS(`document.querySelector('.transcript .proposal[data-state=succeeded][data-proposal="`+prop.ID+`"]') !== null`, "bea's confirm to execute")

	if _, err := d.client.GetSchedule(ctxT(t), "nightly-audit"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("the schedule after bea's confirm: %v", err)
	}
	done, err := d.client.Proposal(ctxT(t), prop.ID)
	if err != nil || done.Status != string(store.ProposalSucceeded) || done.SubmittedBy != "alice" || done.DecidedBy != "bea" {
		t.Fatalf("the request after the confirm: %+v, %v", done, err)
	}
	var audit struct {
		Events []struct {
			Actor   string
			Action  string
			Details map[string]any
		}
	}
	appDo(t, d, "GET", "/api/app/audit?limit=200", nil, &audit)
	executed, requested := 0, 0
	for _, e := range audit.Events {
		switch {
		case e.Details["proposal_id"] == prop.ID && e.Details["decision"] == "executed":
			executed++
			if e.Actor != "bea" {
				t.Errorf("the executed row's actor is %q, want bea", e.Actor)
			}
		case e.Action == coordinator.ApprovalRequestedAction && e.Details["proposal_id"] == prop.ID:
			requested++
			if e.Actor != "alice" {
				t.Errorf("the request's row's actor is %q, want alice", e.Actor)
			}
		}
	}
	if executed != 1 || requested != 1 {
		t.Fatalf("%d executed and %d requested audit rows, want 1 each", executed, requested)
	}
}

// TestAmendedRequestWaitsForAnotherApprover: with --second-approver-for
// destructive, alice asks to delete a schedule; bea, an approver, may
// amend her request, but the amendment is bea's own command: her card's
// Edit, the form and the amended card say it needs another approver, the
// form sends it for approval without confirming it, and bea cannot
// confirm it. Alice, the other person, confirms bea's amendment, and what
// it names is deleted, not what alice first asked for.
func TestAmendedRequestWaitsForAnotherApprover(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, `{"turns":[{"steps":[{"text":"ok"}]}]}`, "--second-approver-for", "destructive")
	alice := addPrincipal(t, d, "alice", protocol.RoleOperator)
	bea := addPrincipal(t, d, "bea", protocol.RoleApprover)
	var other struct{ ID string }
	appDo(t, d, "POST", "/api/app/schedules", map[string]any{"name": "weekly-audit", "cron": "0 6 * * 1", "playbook": "audit-repo", "args": map[string]string{"repo": "acme/api"}, "enabled": true}, &other)
	var sent *apiclient.ApprovalPendingError
	if err := apiclient.New(d.URL, alice, nil).Do(ctxT(t), "DELETE", "/api/app/schedules/nightly-audit", nil, nil); !errors.As(err, &sent) {
		t.Fatalf("alice's delete was not sent for approval: %v", err)
	}
	pending, err := d.client.Proposals(ctxT(t), "pending")
	if err != nil || len(pending) != 1 || pending[0].SubmittedBy != "alice" {
		t.Fatalf("pending proposals %+v, %v", pending, err)
	}
	orig := pending[0]
	card := `.transcript .proposal[data-proposal="` + orig.ID + `"]`
	amended := `.transcript .proposal:has([data-amends="` + orig.ID + `"])`

	b := openPageAs(t, d, "/", bea)
	b.openDock()
	b.setValue(`#dock-conv`, orig.ConversationID)
	b.waitJS(`document.querySelector('`+card+` [data-people]')?.innerText === 'Approval requested by alice.'`, "alice's request on bea's card")
	if got := eval[string](b, `document.querySelector('`+card+` button[data-action=amend]').innerText`); got != "Edit and send for approval" {
		t.Fatalf("bea's Edit reads %q, want it to say the amendment is sent for approval", got)
	}
	b.click(card + ` button[data-action=amend]`)
	b.waitJS(`document.querySelector('dialog[open] [data-field=schedule]') !== null`, "the amend form")
	if note := eval[string](b, `document.querySelector('dialog[open] [data-amend-note]').innerText`); !strings.Contains(note, "needs another approver") {
		t.Errorf("the amend form says %q, not that another approver must confirm it", note)
	}
	if got := eval[string](b, `document.querySelector('dialog[open] button[data-action=confirm-amended]').innerText`); got != "Send amended command for approval" {
		t.Errorf("the form's submit reads %q", got)
	}
	b.setValue(`dialog[open] [data-field=schedule]`, other.ID)
	b.shot("amend-request-form")
	b.click(`dialog[open] button[data-action=confirm-amended]`)
	b.waitJS(`document.querySelector('dialog[open]') === null && document.querySelector('`+card+`').dataset.state === 'amended'`, "alice's request replaced")
	b.waitJS(`document.querySelector('`+amended+` [data-amends]')?.innerText.includes('needs another approver') && document.querySelector('`+amended+` button[data-action=confirm]')?.disabled`, "bea's amendment waiting for another approver")
	eval[bool](b, `(document.querySelector('`+amended+`').scrollIntoView({block: 'start'}), true)`)
	b.shot("amend-request-waiting")

	pending, err = d.client.Proposals(ctxT(t), "pending")
	if err != nil || len(pending) != 1 || pending[0].SubmittedBy != "bea" || pending[0].Amends == nil || *pending[0].Amends != orig.ID {
		t.Fatalf("after bea's amendment, pending proposals %+v, %v", pending, err)
	}
	next := pending[0]

	// Alice is the other person: she confirms bea's amendment.
	a := openPageAs(t, d, "/", alice)
	a.openDock()
	a.setValue(`#dock-conv`, orig.ConversationID)
	a.waitJS(`document.querySelector('`+amended+` [data-amends]')?.innerText === "bea's amendment of an earlier proposal: confirm it to run this command."`, "bea's amendment on alice's card")
	a.setValue(amended+` input[data-typed-confirm]`, "weekly-audit")
	a.waitJS(`!document.querySelector('`+amended+` button[data-action=confirm]').disabled`, "alice's confirmable card")
	a.click(amended + ` button[data-action=confirm]`)
	a.waitJS(`document.querySelector('`+amended+`').dataset.state === 'succeeded'`, "the amendment executed")
	if _, err := d.client.GetSchedule(ctxT(t), "weekly-audit"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("weekly-audit after the amendment ran: %v", err)
	}
	if _, err := d.client.GetSchedule(ctxT(t), "nightly-audit"); err != nil {
		t.Fatalf("nightly-audit, which the amendment replaced: %v", err)
	}
	done, err := d.client.Proposal(ctxT(t), next.ID)
	if err != nil || done.SubmittedBy != "bea" || done.DecidedBy != "alice" {
		t.Fatalf("the amendment after the confirm: %+v, %v", done, err)
	}
}
