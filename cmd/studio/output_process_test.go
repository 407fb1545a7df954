package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// pendingProposal sends an instruction the offline model turns into a
// proposal and returns the proposal's id, read from the card send prints.
func pendingProposal(t *testing.T, c *cliRunner, args ...string) string {
	t.Helper()
	out, _ := c.run(exitOK, append([]string{"operator", "send"}, args...)...)
	m := regexp.MustCompile(`studio operator confirm ([0-9a-f-]{36})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("send %v made no proposal:\n%s", args, out)
	}
	return m[1]
}

// seeded is a daemon with a run, a workflow and a pending proposal, and
// the CLI against it.
func seeded(t *testing.T) (*cliRunner, studio.Run, protocol.ProposalState) {
	t.Helper()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	c := newCLIRunner(t, d, dataDir)
	ctx := testCtx(t)
	run, err := d.client.LaunchPlaybook(ctx, studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "acme/api"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.client.Proposal(ctx, pendingProposal(t, c, "resume the nightly schedule"))
	if err != nil {
		t.Fatal(err)
	}
	c.run(exitOK, "workflows", "create", "release", "--step", `{"playbook":"audit-repo","args":{"repo":"acme/api"}}`)
	return c, run, p
}

// TestProcessJSONTimes: every command's -o json writes its times as RFC
// 3339 in UTC (decodeCLIJSON fails on a number where a time is), the
// following commands' JSON lines too.
func TestProcessJSONTimes(t *testing.T) {
	t.Parallel()
	c, run, p := seeded(t)
	pid := p.ID

	// Each command's document, and a time it must carry as RFC 3339.
	for _, tc := range []struct {
		args []string
		path []string // to a time, through objects and first elements
	}{
		{[]string{"runs", "list"}, []string{"runs", "createdAt"}},
		{[]string{"runs", "show", run.ID}, []string{"createdAt"}},
		{[]string{"playbooks", "list"}, []string{"playbooks", "updatedAt"}},
		{[]string{"playbooks", "show", "audit-repo"}, []string{"createdAt"}},
		{[]string{"workflows", "list"}, []string{"workflows", "createdAt"}},
		{[]string{"workflows", "show", "release"}, []string{"updatedAt"}},
		{[]string{"schedules", "list"}, []string{"schedules", "createdAt"}},
		{[]string{"schedules", "show", "nightly-audit"}, []string{"createdAt"}},
		{[]string{"audit", "list"}, []string{"events", "createdAt"}},
		{[]string{"operator", "conversations", "list"}, []string{"conversations", "updatedAt"}},
		{[]string{"operator", "conversations", "show", p.ConversationID}, []string{"frames", "createdAt"}},
		{[]string{"operator", "proposals"}, []string{"proposals", "expiresAt"}},
		{[]string{"approvals", "list"}, []string{"proposals", "expiresAt"}},
		{[]string{"approvals", "show", pid}, []string{"expiresAt"}},
		{[]string{"operator", "ticket", "--conversation", p.ConversationID}, []string{"expiresAt"}},
		{[]string{"principals", "list"}, []string{"principals", "createdAt"}},
		{[]string{"tokens", "list"}, nil},
		{[]string{"webhooks", "list"}, nil},
		{[]string{"whoami"}, nil},
		{[]string{"doctor"}, []string{"checkedAt"}},
	} {
		var doc any
		c.json(&doc, append(tc.args, "-o", "json")...)
		if tc.path != nil {
			if _, ok := timeAt(doc, tc.path).(float64); !ok {
				t.Errorf("studio %v -o json: no time at %v", tc.args, tc.path)
			}
		}
	}
	// The JSON lines of send and stream: each frame's createdAt.
	out, _ := c.run(exitOK, "operator", "send", "-o", "json", "how many runs failed today?")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var f protocol.RawFrame
		if decodeCLIJSON(t, line, &f); f.CreatedAt == 0 {
			t.Fatalf("send -o json: a frame without its time: %s", line)
		}
	}
}

// timeAt follows path through objects (and the first element of arrays)
// and returns what is there.
func timeAt(doc any, path []string) any {
	for _, k := range path {
		if arr, ok := doc.([]any); ok && len(arr) > 0 {
			doc = arr[0]
		}
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[k]
	}
	if arr, ok := doc.([]any); ok && len(arr) > 0 {
		return arr[0]
	}
	return doc
}

// TestProcessCompletion: shell completion offers the ids and names an
// argument takes and the values of enumerated flags, asked of the
// daemon; with no daemon it offers nothing and still succeeds.
func TestProcessCompletion(t *testing.T) {
	t.Parallel()
	c, run, p := seeded(t)
	pid := p.ID

	complete := func(args ...string) []string {
		t.Helper()
		out, _ := c.run(exitOK, append([]string{"__complete"}, args...)...)
		var values []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.HasPrefix(line, ":") { // the directive
				if line != ":4" {
					t.Errorf("__complete %v: directive %s, want :4 (no file names)", args, line)
				}
				continue
			}
			v, _, _ := strings.Cut(line, "\t")
			values = append(values, v)
		}
		return values
	}
	for _, tc := range []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"runs", "show", ""}, []string{run.ID}, nil},
		{[]string{"runs", "logs", run.ID[:6]}, []string{run.ID}, nil},
		{[]string{"runs", "list", "--status", ""}, runStatusValues, nil},
		{[]string{"runs", "list", "--status", "f"}, []string{"failed"}, []string{"queued"}},
		{[]string{"runs", "list", "--playbook", "aud"}, []string{"audit-repo"}, []string{"write-release-notes"}},
		{[]string{"operator", "proposals", "--status", "pending,ex"}, []string{"pending,executing", "pending,expired"}, nil},
		{[]string{"operator", "conversations", "list", "--status", ""}, conversationStatusValues, nil},
		{[]string{"operator", "conversations", "show", ""}, []string{p.ConversationID}, nil},
		{[]string{"operator", "conversations", "model", p.ConversationID, ""}, []string{"offline"}, nil},
		{[]string{"operator", "send", "--conversation", ""}, []string{p.ConversationID}, nil},
		{[]string{"operator", "confirm", ""}, []string{pid}, nil},
		{[]string{"approvals", "deny", ""}, []string{pid}, nil},
		{[]string{"playbooks", "launch", ""}, []string{"audit-repo", "summarize-failed-runs", "write-release-notes"}, nil},
		{[]string{"workflows", "show", ""}, []string{"release"}, nil},
		{[]string{"schedules", "edit", ""}, []string{"nightly-audit"}, nil},
		{[]string{"schedules", "edit", "nightly-audit", "--playbook", ""}, []string{"audit-repo"}, nil},
		{[]string{"schedules", "list", "-o", ""}, []string{"table", "json"}, nil},
		{[]string{"runs", "show", run.ID, ""}, nil, []string{run.ID}},
	} {
		got := complete(tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+w+" ") {
				t.Errorf("__complete %v = %v, lacks %q", tc.args, got, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(" "+strings.Join(got, " ")+" ", " "+n+" ") {
				t.Errorf("__complete %v = %v, has %q", tc.args, got, n)
			}
		}
	}
	// No daemon: nothing offered, and no error.
	out, _, code := runStudio(t, []string{"STUDIO_URL=http://127.0.0.1:1", "STUDIO_TOKEN=x"}, "__complete", "runs", "show", "")
	if code != exitOK || strings.TrimSpace(out) != ":4" {
		t.Fatalf("completion without a daemon: exit %d: %q", code, out)
	}
	// The scripts themselves: bash's asks the binary.
	if script, _ := c.run(exitOK, "completion", "bash"); !strings.Contains(script, "__complete") {
		t.Fatalf("completion bash: %s", script)
	}
}
