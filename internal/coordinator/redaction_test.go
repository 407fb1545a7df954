package coordinator_test

import (
	"strings"
	"testing"

	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// A playbook whose prompt holds host paths and secrets: what a read tool
// returns of it reaches the tool_result frame redacted (docs/design.md §16),
// whatever the shape of the secret, and what the cockpit uses (routes, names)
// stays.
func TestToolResultsAreRedacted(t *testing.T) {
	t.Parallel()
	secrets := []string{"/opt/studio/creds.txt", "/srv/app/.env", "/etc/shadow", "hunter2",
		"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "ghp_9aZ8bY7cX6dW5eV4fU3gT2hS1iR0jQ9kP8lO",
		"sk-proj-4fX9aQ2LmZ7bT1cR8dV3eW6gH0jK5nP2sU7yB9", "MIIEowIBAAKCAQEA"}
	prompt := "Audit {{input}} using /opt/studio/creds.txt /srv/app/.env /etc/shadow password=hunter2 " +
		"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY with ghp_9aZ8bY7cX6dW5eV4fU3gT2hS1iR0jQ9kP8lO " +
		"or sk-proj-4fX9aQ2LmZ7bT1cR8dV3eW6gH0jK5nP2sU7yB9.\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n" +
		"Then open /library and http://127.0.0.1:8765/history?status=failed."
	s := script.Script{Turns: []script.Turn{{Steps: []script.Step{
		toolStep("get_playbook", `{"playbook":"leaky"}`),
		toolStep("list_playbooks", `{"query":"leaky"}`),
		{Text: ptr("read it")},
	}}}}
	e := newEngine(t, engineOpts{script: &s})
	if _, err := e.app.Execute(e.ctx(), studio.CreatePlaybookCommand{Name: "leaky", Prompt: prompt}, studio.ExecOptions{Trigger: studio.TriggerManual}); err != nil {
		t.Fatal(err)
	}
	conv := e.conversation()
	acc := e.submit(conv, "show me the leaky playbook")
	results := 0
	for _, f := range e.waitDone(conv, acc.RequestID) {
		tr, ok := f.Payload.(protocol.ToolResultPayload)
		if !ok {
			continue
		}
		results++
		if !tr.OK {
			t.Fatalf("tool result failed: %+v", tr.Error)
		}
		got := string(tr.Result)
		for _, secret := range secrets {
			if strings.Contains(got, secret) {
				t.Errorf("tool_result frame %d carries %q: %s", f.Sequence, secret, got)
			}
		}
		for _, keep := range []string{"/library", "http://127.0.0.1:8765/history?status=failed", "leaky"} {
			if !strings.Contains(got, keep) {
				t.Errorf("tool_result frame %d lost %q: %s", f.Sequence, keep, got)
			}
		}
	}
	if results != 2 {
		t.Fatalf("%d tool results, want 2", results)
	}
}
