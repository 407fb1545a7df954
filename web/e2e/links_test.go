package e2e_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// TestProposalLinkOpensTheDock: the link a webhook message carries,
// /#conversation=ID&proposal=ID, opens the dock on that conversation with
// the proposal's card in view, and leaves the address bar clean.
func TestProposalLinkOpensTheDock(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	ctx := ctxT(t)
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if _, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "e2e-launch the audit",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero}); err != nil {
		t.Fatal(err)
	}
	var pid string
	err = d.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
		if c, ok := f.Payload.(protocol.ConfirmationPayload); ok && c.State == protocol.ConfirmationRequired {
			pid = c.ProposalID
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil || pid == "" {
		t.Fatalf("proposal %q, %v", pid, err)
	}
	p := openPage(t, d, "/history") // signs in; the link below loads the page anew
	p.do(chromedp.Navigate(d.URL + "/#conversation=" + conv.ID + "&proposal=" + pid))
	p.waitJS(`document.querySelector('.dock-open') !== null`, "the dock open")
	p.waitJS(`document.querySelector('.proposal[data-proposal="`+pid+`"][data-state=required]') !== null`, "the proposal's card in the dock")
	if loc := eval[string](p, `location.pathname + location.search + location.hash`); loc != "/" {
		t.Fatalf("address bar %q, want the fragment removed", loc)
	}
	p.shot("dock-opened-from-link")
}

// TestShortRunIDInALink: the 8-character id the tables and the command
// line show opens the run from a link; the address then holds its full
// id and its row in the fleet is marked.
func TestShortRunIDInALink(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	var ids []string
	for i := range 3 {
		ids = append(ids, launch(t, d, fmt.Sprintf("acme/%d", i)))
	}
	id := ids[1]
	p := openPage(t, d, "/?view=fleet&run="+id[:8])
	p.waitJS(`document.querySelector('.detail [data-run-status]') !== null`, "the run's detail from its short id")
	if got := eval[string](p, `document.querySelector('#run-title code').title`); got != id {
		t.Fatalf("the detail shows run %s, want %s", got, id)
	}
	p.waitJS(`location.search.includes('run=`+id+`')`, "the full id in the address")
	p.waitJS(`document.querySelector('.list-pane tr.selected')?.dataset.key === '`+id+`'`, "the run's row marked")
	// A prefix no run has: said so.
	eval[bool](p, `(window.studio.go('/?view=fleet&run=ffffffff'), true)`)
	p.waitJS(`document.querySelector('.detail .error-box')?.innerText.includes('No run ffffffff exists')`, "no such run")
}
