package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

// TestProcessApprovals: studio approvals lists what waits for the caller's
// decision, across conversations, oldest first with its expiry, by the
// daemon's policy: not one's own proposal under four-eyes (execute
// covers admin), not an admin proposal for an operator; show says whose it is to decide;
// confirm and deny decide it, and it leaves the list.
func TestProcessApprovals(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, "--second-approver-for", "execute")
	owner := newCLIRunner(t, d, dataDir)
	alice, bob := operatorCLI(t, d, owner, "alice"), operatorCLI(t, d, owner, "bob")

	launch := pendingProposal(t, alice, "launch audit-repo with acme/api")
	vacuum := pendingProposal(t, owner, "vacuum the database")

	list := func(c *cliRunner) []protocol.ProposalState {
		t.Helper()
		var doc struct {
			Proposals []protocol.ProposalState `json:"proposals"`
		}
		c.json(&doc, "approvals", "-o", "json")
		return doc.Proposals
	}
	ids := func(ps []protocol.ProposalState) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return strings.Join(out, " ")
	}
	if got := ids(list(alice)); got != "" {
		t.Errorf("alice (the launch's author, four-eyes; an operator, not the vacuum's approver) waits for %q", got)
	}
	if got := ids(list(bob)); got != launch {
		t.Errorf("bob waits for %q, want alice's launch %s", got, launch)
	}
	// Levels are ordered: execute covers admin, so the owner's own vacuum
	// waits for another approver, not for the owner.
	ps := list(owner)
	if ids(ps) != launch || ps[0].ExpiresAt == 0 {
		t.Fatalf("the owner waits for %q, want the launch only (its own vacuum is above execute), with expiry", ids(ps))
	}

	out, _ := bob.run(exitOK, "approvals")
	row := regexp.MustCompile(launch + `\s+\d+s\s+in \d+m\d+s, at \S+Z\s+execute\s+Launch playbook "audit-repo".*\s+alice\s+launch audit-repo with acme/api`)
	if !row.MatchString(out) || strings.Contains(out, vacuum) {
		t.Errorf("bob's approvals:\n%s", out)
	}
	if out, _ := alice.run(exitOK, "approvals"); !strings.Contains(out, "nothing waits for your decision") {
		t.Errorf("alice's approvals:\n%s", out)
	}
	if out, _ := bob.run(exitOK, "approvals", "show", launch[:8]); !strings.Contains(out, "confirm: studio approvals confirm "+launch) ||
		!strings.Contains(out, `"repo": "acme/api"`) || !strings.Contains(out, "proposed by:   alice") {
		t.Errorf("bob's approvals show:\n%s", out)
	}
	if out, _ := alice.run(exitOK, "approvals", "show", launch[:8]); !strings.Contains(out, "It waits for someone else") || strings.Contains(out, "confirm: studio") {
		t.Errorf("alice's approvals show:\n%s", out)
	}

	var res protocol.ProposalResult
	bob.json(&res, "approvals", "confirm", "--yes", launch[:8], "-o", "json")
	if res.Status != protocol.ResultSucceeded {
		t.Fatalf("bob's confirm: %+v", res)
	}
	if out, _ := owner.run(exitOK, "approvals", "deny", vacuum[:8]); !strings.Contains(out, "denied") {
		t.Fatalf("the owner's deny: %s", out)
	}
	for name, c := range map[string]*cliRunner{"alice": alice, "bob": bob, "the owner": owner} {
		if got := ids(list(c)); got != "" {
			t.Errorf("after the decisions %s waits for %q", name, got)
		}
	}
}

// TestProcessDirectCommandSentForApproval: under --second-approver-for
// destructive, alice's `studio schedules delete` prints "Sent for
// approval" with the proposal and exits 6; the schedule stays; bob finds
// it in `studio approvals` and confirms it; it is deleted once.
func TestProcessDirectCommandSentForApproval(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, "--second-approver-for", "destructive")
	owner := newCLIRunner(t, d, dataDir)
	alice, bob := operatorCLI(t, d, owner, "alice"), operatorCLI(t, d, owner, "bob")

	out, _ := alice.run(exitPending, "schedules", "delete", "nightly-audit")
	m := regexp.MustCompile(`Sent for approval: waiting for another approver \(proposal ([0-9a-f-]{36}), expires \S+Z\)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "studio approvals") {
		t.Fatalf("alice's delete said:\n%s", out)
	}
	id := m[1]
	if _, err := d.client.GetSchedule(testCtx(t), "nightly-audit"); err != nil {
		t.Fatalf("the schedule before anyone approved: %v", err)
	}
	if out, _ := alice.run(exitOK, "approvals"); strings.Contains(out, id) {
		t.Errorf("alice's own request waits for her:\n%s", out)
	}
	if out, _ := bob.run(exitOK, "approvals"); !strings.Contains(out, id) || !strings.Contains(out, "alice") {
		t.Fatalf("bob's approvals:\n%s", out)
	}
	var res protocol.ProposalResult
	bob.json(&res, "approvals", "confirm", "--yes", id[:8], "-o", "json")
	if res.Status != protocol.ResultSucceeded {
		t.Fatalf("bob's confirm: %+v", res)
	}
	if _, err := d.client.GetSchedule(testCtx(t), "nightly-audit"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("the schedule after bob's confirm: %v", err)
	}
}

// operatorCLI adds an operator through the owner's CLI and runs the CLI
// with a personal token of it.
func operatorCLI(t *testing.T, d *daemon, owner *cliRunner, name string) *cliRunner {
	t.Helper()
	owner.run(exitOK, "principals", "add", name, "--role", "operator")
	out, _ := owner.run(exitOK, "tokens", "create", name, "-o", "json")
	var tok struct{ Token string }
	decodeCLIJSON(t, out, &tok)
	return &cliRunner{t: t, env: []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=" + tok.Token, "STUDIO_DATA_DIR=" + t.TempDir()}}
}
