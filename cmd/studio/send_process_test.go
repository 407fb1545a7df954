package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// TestProcessSendIsForPeople: a CLI user who asks for the failed runs is
// answered with them (the turn says it comes from the command line, so
// no navigation is asked for); a proposal reads as a card with the exact
// commands that decide it; an effect of a cockpit turn is one line that
// says it was not applied here; no frame is printed raw. -o json keeps
// every frame.
func TestProcessSendIsForPeople(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	// Runs use the default model, which fails: a failed run. The operator
	// talks through the offline model.
	failing := writeScript(t, `{"turns":[{"steps":[{"fail":{"code":"model_failure","message":"the model is down"}}]}]}`)
	d := startDaemon(t, dataDir, "--model", "script:"+failing, "--provider", "off=offline")
	c := newCLIRunner(t, d, dataDir)
	ctx := testCtx(t)

	run, err := d.client.LaunchPlaybook(ctx, studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "acme/api"}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, func() bool {
		r, err := d.client.GetRun(ctx, run.ID)
		return err == nil && r.Status == "failed"
	}, "the run fails")

	out, errOut := c.run(exitOK, "operator", "send", "--model", "off", "show the failed runs")
	for _, want := range []string{"Failed runs:", "audit-repo `" + run.ID[:8] + "` (failed): model_failure"} {
		if !strings.Contains(out, want) {
			t.Errorf("send \"show the failed runs\" lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "asked the cockpit") || strings.Contains(out, "{") || regexp.MustCompile(`\[\d+\]`).MatchString(out) {
		t.Errorf("send prints navigation or raw frames:\n%s", out)
	}
	conv := regexp.MustCompile(`conversation ([0-9a-f-]{36})`).FindStringSubmatch(errOut)[1]
	var page struct {
		Frames []protocol.RawFrame `json:"frames"`
	}
	c.json(&page, "operator", "conversations", "show", conv, "-o", "json")
	var types []string
	for _, f := range page.Frames {
		if f.Type != protocol.FrameText || len(types) == 0 || types[len(types)-1] != "text" {
			types = append(types, string(f.Type))
		}
	}
	if got := strings.Join(types, " "); got != "text tool_call tool_result text done" {
		t.Errorf("the CLI turn's frames (texts in a row as one): %s", got)
	}

	// A proposal: a card, the full id in the commands that decide it.
	out, _ = c.run(exitOK, "operator", "send", "--model", "off", "--conversation", conv, "resume the nightly schedule")
	card := regexp.MustCompile(`(?m)^PROPOSAL \(mutate\) Enable schedule "nightly-audit"\n  id: +([0-9a-f-]{36})\n  target: +schedule nightly-audit \(version \d+\)\n  expires: +in \d+m\d+s, at \S+Z\n  confirm: +studio operator confirm ([0-9a-f-]{36})\n  deny: +studio operator deny ([0-9a-f-]{36})\n`)
	m := card.FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[2] != m[3] {
		t.Fatalf("the proposal's card:\n%s", out)
	}
	if strings.Contains(out, `"schedule"`) || strings.Contains(out, "tool ") {
		t.Errorf("the card shows raw frames:\n%s", out)
	}
	out, _ = c.run(exitOK, "operator", "deny", m[1])
	if !strings.Contains(out, "denied") {
		t.Fatalf("deny: %s", out)
	}
	if out, _ = c.run(exitOK, "operator", "conversations", "show", conv); !strings.Contains(out, "proposal "+m[1][:8]+" denied: nothing changed") {
		t.Errorf("the transcript's decision:\n%s", out)
	}

	// A cockpit turn (no client named) asks for navigation: on the command
	// line, one line that says so.
	cockpit := c.newConversation(t, "off")
	zero := int64(0)
	acc, err := d.client.SubmitTurn(ctx, cockpit, protocol.TurnRequest{Instruction: "show the failed runs",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, func() bool {
		p, err := d.client.GetConversation(ctx, cockpit, 0, 1)
		return err == nil && p.Conversation.ActiveRequestID == nil
	}, "turn", acc.RequestID, "ends")
	out, _ = c.run(exitOK, "operator", "conversations", "show", cockpit)
	if !strings.Contains(out, "\n  asked the cockpit to open Fleet (failed runs) — not applied here\n") || strings.Contains(out, "effect") {
		t.Errorf("a cockpit turn's effect on the command line:\n%s", out)
	}

	// -o json: the frames themselves, one a line.
	out, _ = c.run(exitOK, "operator", "send", "--model", "off", "--conversation", conv, "-o", "json", "show the failed runs")
	var f protocol.RawFrame
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if decodeCLIJSON(t, line, &f); f.Type == protocol.FrameUICommand {
			t.Errorf("send -o json: an effect:\n%s", out)
		}
	}
	if f.Type != protocol.FrameDone || !strings.Contains(out, `"tool":"list_runs"`) {
		t.Errorf("send -o json:\n%s", out)
	}
}

// newConversation creates a conversation whose turns use model.
func (c *cliRunner) newConversation(t *testing.T, model string) string {
	t.Helper()
	var conv protocol.Conversation
	c.json(&conv, "operator", "conversations", "create", "-o", "json")
	c.run(exitOK, "operator", "conversations", "model", conv.ID, model)
	return conv.ID
}
