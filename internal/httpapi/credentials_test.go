package httpapi_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/webhooks"
)

// scannerRules are the secret-scanner rules docs/teams.md gives, by id.
func scannerRules(t *testing.T) map[string]*regexp.Regexp {
	t.Helper()
	doc, err := os.ReadFile("../../docs/teams.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]*regexp.Regexp{}
	var id string
	for _, line := range strings.Split(string(doc), "\n") {
		if v, ok := strings.CutPrefix(line, "id = "); ok {
			id = strings.Trim(v, `"`)
		}
		if v, ok := strings.CutPrefix(line, "regex = '''"); ok {
			rules[id] = regexp.MustCompile(strings.TrimSuffix(v, "'''"))
		}
	}
	if len(rules) != 3 {
		t.Fatalf("docs/teams.md gives %d scanner rules, want 3: %v", len(rules), rules)
	}
	return rules
}

// TestCredentialsScannersRecognise: a token (the token file's too), a
// stream ticket and a webhook secret, as the daemon makes them, each match
// exactly their own rule of docs/teams.md, in text around them too, and
// the daemon's redaction removes each.
func TestCredentialsScannersRecognise(t *testing.T) {
	t.Parallel()
	rules := scannerRules(t)
	h := newHarness(t, harnessOpts{principals: true})
	conv := h.conversation()
	tk, err := h.client.CreateTicket(h.ctx(), protocol.StreamTicketRequest{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	for id, cred := range map[string]string{
		"studio-token":          httpapi.NewToken(),
		"studio-stream-ticket":  tk.Ticket,
		"studio-webhook-secret": secret,
	} {
		for _, text := range []string{cred, "STUDIO_TOKEN=" + cred + "\n", `{"secret":"` + cred + `"}`} {
			for rid, re := range rules {
				if got := re.FindString(text) == cred; got != (rid == id) {
					t.Errorf("rule %s on the %s in %q: matched %t", rid, id, text, got)
				}
			}
			if out := redact.Text(text); strings.Contains(out, cred[8:]) {
				t.Errorf("redaction leaves the %s: %q", id, out)
			}
		}
	}
	if !strings.HasPrefix(tk.Ticket, protocol.TicketPrefix) {
		t.Fatalf("ticket %q without its prefix", tk.Ticket)
	}
}
