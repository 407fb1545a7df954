package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/studio/operator/internal/protocol"
)

// TestApprovalsInbox: what waits for a person is found without a direct
// link. An approver's top bar counts the proposals she may decide across
// the conversations she can see; the list is oldest first, says where,
// who proposed and when each expires, and opens each in the dock; the
// conversation list marks conversations with a waiting proposal; a
// decision taken elsewhere takes it off live; System's "Awaiting
// confirmation" and a #inbox link open the list.
func TestApprovalsInbox(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, reviewScript)
	src := axeSource(t)
	bea := addPrincipal(t, d, "bea", protocol.RoleApprover)
	alice := addPrincipal(t, d, "alice", protocol.RoleOperator)
	var convs, props []string
	for _, title := range []string{"First ask", "Second ask"} {
		c, err := d.client.CreateConversation(ctxT(t), protocol.CreateConversationRequest{Title: &title})
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, c.ID)
		props = append(props, submitAs(t, d, alice, c.ID, "e2e-launch "+title, true))
	}

	p := openPageAs(t, d, "/", bea)
	p.waitJS(`document.querySelector('[data-inbox-count]')?.dataset.inboxCount === '2'`, "the top bar counting two proposals")
	if name := eval[string](p, `document.querySelector('[data-inbox]').innerText.replace(/\s+/g, ' ')`); !strings.Contains(name, "2") {
		t.Errorf("the inbox button reads %q", name)
	}
	p.click(`[data-inbox]`)
	p.waitJS(`document.querySelectorAll('dialog[open] .inbox-item').length === 2`, "the two proposals in the inbox")
	if order := eval[[]string](p, `[...document.querySelectorAll('dialog[open] .inbox-item')].map(li => li.dataset.proposalId)`); fmt.Sprint(order) != fmt.Sprint(props) {
		t.Fatalf("the inbox lists %v, want oldest first %v", order, props)
	}
	first := eval[string](p, `document.querySelector('dialog[open] .inbox-item').innerText`)
	for _, want := range []string{"First ask", "proposed by alice", "Expires in", "UTC"} {
		if !strings.Contains(first, want) {
			t.Errorf("the first item does not say %q:\n%s", want, first)
		}
	}
	p.axeCheck(src, "the approvals inbox")
	p.shot("inbox-approver")
	p.click(`dialog[open] [data-open-proposal="` + props[0] + `"]`)
	p.waitJS(`document.querySelector('#app').classList.contains('dock-open') && window.studio.dock.conv?.id === `+jsString(convs[0])+` && document.querySelector('.proposal.highlight[data-proposal="`+props[0]+`"]') !== null`, "the dock open on the first proposal")
	// The conversation list marks where proposals wait.
	p.waitJS(`document.querySelector('#dock-conv option[value="`+convs[1]+`"]')?.dataset.waiting === '1' && document.querySelector('#dock-conv option[value="`+convs[1]+`"]').innerText.includes('waiting')`, "the other conversation marked waiting")

	// Decided elsewhere: off the list, without a reload.
	if _, err := d.client.Deny(ctxT(t), convs[0], props[0]); err != nil {
		t.Fatal(err)
	}
	p.waitJS(`document.querySelector('[data-inbox-count]').dataset.inboxCount === '1'`, "the count down to one")
	p.waitJS(`document.querySelector('#dock-conv option[value="`+convs[0]+`"]')?.dataset.waiting === '0'`, "the first conversation no longer marked")
	p.click(".dock [data-action=close-dock]")

	// System's count of what awaits confirmation opens the inbox.
	eval[bool](p, `(window.studio.go('/system'), true)`)
	p.click(`[data-open-inbox]`)
	p.waitJS(`document.querySelectorAll('dialog[open] .inbox-item').length === 1`, "the inbox from System")
	p.do(chromedp.KeyEvent("\x1b"))
	p.waitJS(`document.querySelector('dialog[open]') === null`, "the inbox closed")

	// A link a message carries: #inbox opens it.
	p.do(chromedp.Navigate(d.URL + "/history#inbox"))
	p.waitJS(`document.querySelector('dialog[open][data-inbox-dialog]') !== null && !location.hash.includes('inbox')`, "the inbox from a #inbox link")
}
