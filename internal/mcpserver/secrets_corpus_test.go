package mcpserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/redact/redacttest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/webhooks"
)

// TestSecretsCorpusNotInMCPResults: application data that holds a secret
// of each family of the corpus (a playbook's description an older daemon
// or a person kept), read by an agent over MCP with the official client,
// and a call whose argument is the secret itself (its error quotes it):
// no result holds the secret.
func TestSecretsCorpusNotInMCPResults(t *testing.T) {
	t.Parallel()
	redacttest.Register()
	d := newDaemon(t, daemonOpts{callsPerMinute: 1000, burst: 200})
	whsec, _ := webhooks.NewSecret()
	corpus := redacttest.Families(httpapi.NewToken(), "Tk9rZXQtVGlja2V0LUZvci1UZXN0cy0wMTIzNDU2Nzg", whsec)
	owner := d.api(ownerToken)
	for i, sh := range corpus {
		if _, err := owner.CreatePlaybook(d.ctx(), studio.CreatePlaybookCommand{Name: fmt.Sprintf("corpus-%d", i),
			Description: "notes: " + sh.Value, Prompt: "p"}); err != nil {
			t.Fatalf("%s: %v", sh.Family, err)
		}
	}
	s := d.connect(d.agent, nil)
	text := func(res *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	failed := 0
	for i, sh := range corpus {
		for _, args := range []map[string]any{{"playbook": fmt.Sprintf("corpus-%d", i)}, {"playbook": sh.Value}} {
			res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_playbook", Arguments: args})
			if err != nil {
				t.Fatalf("%s: %v", sh.Family, err)
			}
			if got := text(res); strings.Contains(got, sh.Needle) {
				failed++
				t.Errorf("%s: the MCP result holds the secret: %.300s", sh.Family, got)
			}
		}
	}
	t.Logf("secrets corpus over MCP: %d families × 2 calls, %d results held a secret", len(corpus), failed)
}
