package e2e_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/protocol"
)

// TestProposalOfAnAgentOpensFromItsLink: an agent's command tool (the SDK's
// client on /mcp with an agent principal's token) answers a pending
// proposal and its cockpitUrl; that link opens the dock on the card, where
// the human confirms it.
func TestProposalOfAnAgentOpensFromItsLink(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	ctx := ctxT(t)
	if _, err := d.client.CreatePrincipal(ctx, "claude", protocol.RoleAgent); err != nil {
		t.Fatal(err)
	}
	tok, err := d.client.CreateToken(ctx, "claude", "")
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-assistant", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp",
		HTTPClient: &http.Client{Transport: mcpserver.BearerTransport{Token: tok.Token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "set_schedule_enabled", Arguments: map[string]any{"schedule": "nightly-audit", "enabled": true}})
	if err != nil || res.IsError {
		t.Fatalf("set_schedule_enabled: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var pending mcpserver.Pending
	if err := json.Unmarshal(b, &pending); err != nil || pending.Status != "pending" {
		t.Fatalf("pending %s: %v", b, err)
	}
	if !strings.HasPrefix(pending.CockpitURL, d.URL+"/#") {
		t.Fatalf("cockpitUrl %q", pending.CockpitURL)
	}
	p := openPage(t, d, "/history") // signs in; the link below loads the page anew
	p.do(chromedp.Navigate(pending.CockpitURL))
	card := `document.querySelector('.proposal[data-proposal="` + pending.ProposalID + `"]')`
	p.waitJS(card+` !== null`, "the agent's proposal card")
	if !eval[bool](p, `document.querySelector('.dock-toggle').getAttribute('aria-expanded') === 'true'`) {
		t.Fatal("the link did not open the dock")
	}
	if q := eval[string](p, `location.search + location.hash`); strings.Contains(q, "conversation") {
		t.Fatalf("the link stayed in the address bar: %q", q)
	}
	p.shot("dock-agent-proposal")
	p.click(`.proposal[data-proposal="` + pending.ProposalID + `"] button[data-action=confirm]`)
	p.waitJS(card+`.querySelector('[data-result]') !== null`, "the confirmation result")
	if r := eval[string](p, card+`.querySelector('[data-result]').dataset.result`); r != "succeeded" {
		t.Fatalf("confirmation result %q", r)
	}
}
