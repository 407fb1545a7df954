package offline

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

func request(instr string, msgs ...model.Message) model.Request {
	view := protocol.ContextSnapshot{Space: "mission", Route: "/"}
	all := append([]model.Message{{Role: model.RoleUser, Content: instr}}, msgs...)
	return model.Request{Messages: all, View: &view}
}

// firstCall plans an instruction and returns the first tool call's name and
// canonical arguments ("" when it answers in words).
func firstCall(t *testing.T, instr string) (string, string) {
	t.Helper()
	step := Plan(request(instr))
	if len(step.Calls) == 0 {
		return "", step.Text
	}
	c, err := protocol.Canonicalize(step.Calls[0].Arguments)
	if err != nil {
		t.Fatal(err)
	}
	return step.Calls[0].Name, string(c)
}

func TestPhrasingsToToolCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ instr, tool, args string }{
		{"show failed runs", "navigate", `{"params":{"status":"failed","view":"fleet"},"space":"mission"}`},
		{"Show me the failed runs.", "navigate", `{"params":{"status":"failed","view":"fleet"},"space":"mission"}`},
		{"show running runs", "navigate", `{"params":{"status":"running","view":"fleet"},"space":"mission"}`},
		{"which runs are queued", "navigate", `{"params":{"status":"queued","view":"fleet"},"space":"mission"}`},
		{"show cancelled runs", "navigate", `{"params":{"status":"cancelled","view":"fleet"},"space":"mission"}`},
		{"show successful runs", "navigate", `{"params":{"status":"succeeded","view":"fleet"},"space":"mission"}`},
		{"open the fleet", "navigate", `{"params":{"view":"fleet"},"space":"mission"}`},
		{"open schedules", "navigate", `{"space":"schedules"}`},
		{"go to the library", "navigate", `{"space":"library"}`},
		{"take me to the designer", "navigate", `{"space":"designer"}`},
		{"open history", "navigate", `{"space":"history"}`},
		{"show the audit trail", "navigate", `{"params":{"tab":"audit"},"space":"history"}`},
		{"system", "navigate", `{"space":"system"}`},
		{"mission overview", "navigate", `{"space":"mission"}`},
		{"switch to dark mode", "set_theme", `{"theme":"dark"}`},
		{"Light theme please", "set_theme", `{"theme":"light"}`},
		{"how many runs failed in the last day?", "run_stats", `{"window":"24h"}`},
		{"How many runs this week?", "run_stats", `{"window":"7d"}`},
		{"run stats for today", "run_stats", `{"window":"24h"}`},
		{"what's the system health?", "system_health", `{}`},
		{"is everything ok", "system_health", `{}`},
		{"what failed today?", "list_runs", `{"limit":10,"since":"24h","status":"failed"}`},
		{"list playbooks", "list_playbooks", `{}`},
		{"what workflows are there", "list_workflows", `{}`},
		{"list schedules", "list_schedules", `{}`},
		{"what changed recently in the audit log", "list_audit_events", `{"limit":10}`},
		{"list the runs", "list_runs", `{"limit":10}`},
		{"where am I?", "get_current_view", `{}`},
		{"draft a schedule for audit every weekday at 9", "list_playbooks", `{"query":"audit"}`},
		{"open playbook audit-repo", "get_playbook", `{"playbook":"audit-repo"}`},
		{"show run 6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1", "get_run", `{"id":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1"}`},
	} {
		tool, args := firstCall(t, tc.instr)
		if tool != tc.tool || args != tc.args {
			t.Errorf("%q -> %s %s, want %s %s", tc.instr, tool, args, tc.tool, tc.args)
		}
	}
}

func TestUnknownPhrasingIsAnsweredHonestly(t *testing.T) {
	t.Parallel()
	for _, instr := range []string{"make me a sandwich", "fly to the moon at warp speed", "qwertyuiop", "rm -rf /"} {
		tool, text := firstCall(t, instr)
		if tool != "" || !strings.Contains(text, "did not understand") || !strings.Contains(text, "I can:") {
			t.Errorf("%q -> %s %q", instr, tool, text)
		}
	}
}

func TestAnswersFromResults(t *testing.T) {
	t.Parallel()
	call := model.ToolCall{ID: "c1", Name: "run_stats"}
	msgs := []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{call}},
		{Role: model.RoleTool, ToolCallID: "c1", Content: `{"window":"24h","total":7,"counts":{"failed":3,"succeeded":4},"medianDurationMs":1500}`},
	}
	step := Plan(request("how many runs failed in the last day?", msgs...))
	if len(step.Calls) != 0 || step.Text != "In the last 24 hours, 3 runs failed, out of 7 runs in all." {
		t.Fatalf("answer %+v", step)
	}
	// A navigate result: requested, not done.
	msgs = []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "navigate"}}},
		{Role: model.RoleTool, ToolCallID: "c1", Content: `{"effectId":"e","status":"requested"}`},
	}
	step = Plan(request("show failed runs", msgs...))
	if !strings.Contains(step.Text, "asked the cockpit") || !strings.Contains(step.Text, "whether your browser applied it") {
		t.Fatalf("navigate answer %q", step.Text)
	}
	// A tool error is reported, never papered over.
	msgs = []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "get_playbook"}}},
		{Role: model.RoleTool, ToolCallID: "c1", ToolError: true, Content: `{"error":{"code":"not_found","message":"playbook nope not found"}}`},
	}
	step = Plan(request("open playbook nope", msgs...))
	if !strings.Contains(step.Text, "could not find") {
		t.Fatalf("error answer %q", step.Text)
	}
}

func TestDraftScheduleTwoRounds(t *testing.T) {
	t.Parallel()
	msgs := []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "list_playbooks"}}},
		{Role: model.RoleTool, ToolCallID: "c1", Content: `{"playbooks":[{"name":"audit-repo","description":"audit"}]}`},
	}
	step := Plan(request("draft a schedule for audit every weekday at 9", msgs...))
	if len(step.Calls) != 1 || step.Calls[0].Name != "prefill_form" {
		t.Fatalf("step %+v", step)
	}
	c, _ := protocol.Canonicalize(step.Calls[0].Arguments)
	want := `{"form":"schedule","values":{"cron":"0 9 * * 1-5","enabled":true,"name":"audit-repo-weekdays-0900","playbook":"audit-repo"}}`
	if string(c) != want {
		t.Fatalf("prefill %s, want %s", c, want)
	}
	for in, want := range map[string]string{
		"every monday at 8:30pm": "30 20 * * 1",
		"nightly":                "0 2 * * *",
		"every day at 6":         "0 6 * * *",
		"hourly":                 "0 * * * *",
		"every weekend at 10am":  "0 10 * * 0,6",
	} {
		if got, _ := cronFor(in); got != want {
			t.Errorf("cronFor(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStreamOnlyCallsOfferedTools(t *testing.T) {
	t.Parallel()
	req := request("show failed runs")
	var text string
	for ev, err := range New().Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == model.EventToolCall {
			t.Fatalf("called %s, which was not offered", ev.ToolCall.Name)
		}
		text += ev.Text
	}
	if !strings.Contains(text, "not available") {
		t.Fatalf("text %q", text)
	}
	req.Tools = []model.Tool{{Name: "navigate"}}
	var calls []model.ToolCall
	for ev, err := range New().Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == model.EventToolCall {
			calls = append(calls, ev.ToolCall)
		}
	}
	if len(calls) != 1 || calls[0].Name != "navigate" {
		t.Fatalf("calls %+v", calls)
	}
}

func TestChangePhrasingsBecomeProposals(t *testing.T) {
	t.Parallel()
	pbs := `{"playbooks":[{"name":"audit-repo","args":[{"name":"repo","required":true},{"name":"focus","default":"x"}]}]}`
	runs := `{"runs":[{"id":"3f2a9c1e-0000-4000-8000-000000000001","playbook":"audit-repo","status":"running"},{"id":"77aa0000-0000-4000-8000-000000000002","playbook":"p","status":"failed"}]}`
	failedRuns := `{"runs":[{"id":"77aa0000-0000-4000-8000-000000000002","playbook":"p","status":"failed"}]}`
	schedules := `{"schedules":[{"name":"nightly-audit","enabled":true}]}`
	paused := `{"schedules":[{"name":"nightly-audit","enabled":false}]}`
	for _, tc := range []struct {
		instr, lookup, lookupResult, tool, args string
	}{
		{"launch the audit playbook with input repo x", "list_playbooks", pbs, "launch_playbook", `{"args":{"repo":"repo x"},"input":"repo x","playbook":"audit-repo"}`},
		{"run audit-repo on github.com/acme/api", "list_playbooks", pbs, "launch_playbook", `{"args":{"repo":"github.com/acme/api"},"input":"github.com/acme/api","playbook":"audit-repo"}`},
		{"cancel run 3f2a", "list_runs", runs, "cancel_run", `{"run":"3f2a9c1e-0000-4000-8000-000000000001"}`},
		{"retry the last failed run", "list_runs", failedRuns, "retry_run", `{"run":"77aa0000-0000-4000-8000-000000000002"}`},
		{"pause the nightly schedule", "list_schedules", schedules, "set_schedule_enabled", `{"enabled":false,"schedule":"nightly-audit"}`},
		{"resume the nightly schedule", "list_schedules", paused, "set_schedule_enabled", `{"enabled":true,"schedule":"nightly-audit"}`},
		{"delete schedule nightly-audit", "", "", "delete_schedule", `{"schedule":"nightly-audit"}`},
		{"launch the release workflow", "", "", "launch_workflow", `{"workflow":"release"}`},
		{"run workflow ship", "", "", "launch_workflow", `{"workflow":"ship"}`},
		{"delete the ship workflow", "", "", "delete_workflow", `{"workflow":"ship"}`},
		{"delete workflow named nightly-review", "", "", "delete_workflow", `{"workflow":"nightly-review"}`},
		{"create a playbook named triage that sorts new issues by urgency", "", "", "create_playbook", `{"description":"Sorts new issues by urgency","name":"triage","prompt":"Sorts new issues by urgency.\n\nInput: {{input}}"}`},
		{"vacuum the database", "", "", "run_maintenance", `{"action":"vacuum"}`},
	} {
		var msgs []model.Message
		if tc.lookup != "" {
			tool, _ := firstCall(t, tc.instr)
			if tool != tc.lookup {
				t.Errorf("%q looks up with %s, want %s", tc.instr, tool, tc.lookup)
				continue
			}
			msgs = []model.Message{
				{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: tc.lookup}}},
				{Role: model.RoleTool, ToolCallID: "c1", Content: tc.lookupResult},
			}
		}
		step := Plan(request(tc.instr, msgs...))
		if len(step.Calls) != 1 {
			t.Errorf("%q: step %+v", tc.instr, step)
			continue
		}
		args, _ := protocol.Canonicalize(step.Calls[0].Arguments)
		if step.Calls[0].Name != tc.tool || string(args) != tc.args {
			t.Errorf("%q -> %s %s, want %s %s", tc.instr, step.Calls[0].Name, args, tc.tool, tc.args)
		}
		if !strings.Contains(step.Text, "proposed") || !strings.Contains(step.Text, "until you confirm") {
			t.Errorf("%q: text %q", tc.instr, step.Text)
		}
		// The decision comes back as the last tool result.
		decided := append(msgs,
			model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c2", Name: tc.tool}}},
			model.Message{Role: model.RoleTool, ToolCallID: "c2", ToolError: true, Content: `{"error":{"code":"denied","message":"declined"}}`})
		if got := Plan(request(tc.instr, decided...)); !strings.Contains(got.Text, "declined") || len(got.Calls) != 0 {
			t.Errorf("%q after deny: %+v", tc.instr, got)
		}
	}
}

// TestNoOpIsAnsweredNotProposed: pausing a paused schedule (or resuming a
// running one) would change nothing, so it is answered in words; the
// opposite command is still proposed.
func TestNoOpIsAnsweredNotProposed(t *testing.T) {
	t.Parallel()
	lookup := func(enabled bool) []model.Message {
		return []model.Message{
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "list_schedules"}}},
			{Role: model.RoleTool, ToolCallID: "c1", Content: fmt.Sprintf(`{"schedules":[{"name":"nightly-audit","enabled":%t,"version":3}]}`, enabled)},
		}
	}
	for _, tc := range []struct {
		instr   string
		enabled bool
		want    string
	}{
		{"pause the nightly schedule", false, "nightly-audit is already paused"},
		{"disable the nightly-audit schedule", false, "nightly-audit is already paused"},
		{"resume the nightly schedule", true, "nightly-audit is already enabled"},
	} {
		step := Plan(request(tc.instr, lookup(tc.enabled)...))
		if len(step.Calls) != 0 || !strings.Contains(step.Text, tc.want) {
			t.Errorf("%q on a schedule with enabled=%t: %+v, want the words %q and no call", tc.instr, tc.enabled, step, tc.want)
		}
		step = Plan(request(tc.instr, lookup(!tc.enabled)...))
		if len(step.Calls) != 1 || step.Calls[0].Name != "set_schedule_enabled" {
			t.Errorf("%q on a schedule with enabled=%t: %+v, want a proposal", tc.instr, !tc.enabled, step)
		}
	}
}

// TestThemeAnswerSaysItOnce: the theme request names the cockpit once, and
// its answer stays true whether the browser applied it or not.
func TestThemeAnswerSaysItOnce(t *testing.T) {
	t.Parallel()
	msgs := []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "set_theme"}}},
		{Role: model.RoleTool, ToolCallID: "c1", Content: `{"effectId":"e","status":"requested"}`},
	}
	step := Plan(request("switch to dark mode", msgs...))
	if strings.Count(step.Text, "cockpit") != 1 || !strings.Contains(step.Text, "switch to the dark theme") {
		t.Fatalf("theme answer %q", step.Text)
	}
	if strings.Contains(step.Text, "takes effect once") {
		t.Fatalf("theme answer %q promises a future the dock may already contradict", step.Text)
	}
}

// TestNoChangeIsNotCalledDone: a confirmed command the server found to
// change nothing, or refused as a no-op, is never reported as done.
func TestNoChangeIsNotCalledDone(t *testing.T) {
	t.Parallel()
	lookup := []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "list_schedules"}}},
		{Role: model.RoleTool, ToolCallID: "c1", Content: `{"schedules":[{"name":"nightly-audit","enabled":true,"version":3}]}`},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c2", Name: "set_schedule_enabled"}}},
	}
	for _, tc := range []struct {
		result model.Message
		want   string
	}{
		{model.Message{Role: model.RoleTool, ToolCallID: "c2",
			Content: `{"commandType":"set_schedule_enabled","noChange":true,"message":"schedule \"nightly-audit\" is already paused; nothing changed"}`},
			"nothing changed: schedule \"nightly-audit\" is already paused"},
		{model.Message{Role: model.RoleTool, ToolCallID: "c2", ToolError: true,
			Content: `{"error":{"code":"conflict","message":"schedule \"nightly-audit\" is already paused; nothing to change","details":{"noChange":true}}}`},
			"Nothing to do: schedule \"nightly-audit\" is already paused"},
	} {
		got := Plan(request("pause the nightly schedule", append(append([]model.Message(nil), lookup...), tc.result)...))
		if !strings.Contains(got.Text, tc.want) || strings.Contains(got.Text, "it is done") {
			t.Errorf("answer %q, want %q and never \"it is done\"", got.Text, tc.want)
		}
	}
}

// TestDeleteIsNeverNavigation: a request to delete or change something is a
// proposal of that command, or a plain refusal in words; it never becomes a
// navigation or a read that the answer would pass off as done.
func TestDeleteIsNeverNavigation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ instr, tool, args string }{
		{"delete playbook audit-repo", "delete_playbook", `{"playbook":"audit-repo"}`},
		{"Delete the playbook named audit-repo.", "delete_playbook", `{"playbook":"audit-repo"}`},
		{"remove the audit-repo playbook", "delete_playbook", `{"playbook":"audit-repo"}`},
	} {
		step := Plan(request(tc.instr))
		if len(step.Calls) != 1 {
			t.Errorf("%q: step %+v, want a %s proposal", tc.instr, step, tc.tool)
			continue
		}
		args, _ := protocol.Canonicalize(step.Calls[0].Arguments)
		if step.Calls[0].Name != tc.tool || string(args) != tc.args {
			t.Errorf("%q -> %s %s, want %s %s", tc.instr, step.Calls[0].Name, args, tc.tool, tc.args)
		}
		if !strings.Contains(step.Text, "proposed to delete the playbook audit-repo") {
			t.Errorf("%q: text %q", tc.instr, step.Text)
		}
	}
	for _, instr := range []string{"delete the failed runs", "delete playbooks", "remove the library", "erase history",
		"rename playbook audit-repo to audit", "edit the nightly schedule", "delete everything in the designer"} {
		step := Plan(request(instr))
		if len(step.Calls) != 0 {
			t.Errorf("%q -> %s, want an answer in words", instr, step.Calls[0].Name)
			continue
		}
		if !strings.Contains(step.Text, "cannot do that") {
			t.Errorf("%q: text %q, want a plain refusal", instr, step.Text)
		}
	}
}

// TestClientWithoutEffectsGetsData: for a client that applies no effects
// (the command line, an MCP client, a text client), what the cockpit would
// navigate to is read and answered with, a theme is declined in words and
// a schedule draft is proposed; the cockpit's phrasings are unchanged.
func TestClientWithoutEffectsGetsData(t *testing.T) {
	t.Parallel()
	plan := func(instr string, client protocol.ClientKind, msgs ...model.Message) Step {
		req := request(instr, msgs...)
		req.Client = client
		return Plan(req)
	}
	for _, client := range []protocol.ClientKind{protocol.ClientCLI, protocol.ClientMCP, protocol.ClientText} {
		for _, tc := range []struct{ instr, tool, args string }{
			{"show the failed runs", "list_runs", `{"limit":20,"status":"failed"}`},
			{"show running runs", "list_runs", `{"limit":20,"status":"running"}`},
			{"open the fleet", "list_runs", `{"limit":20}`},
			{"open schedules", "list_schedules", `{}`},
			{"go to the library", "list_playbooks", `{}`},
			{"take me to the designer", "list_workflows", `{}`},
			{"show the audit trail", "list_audit_events", `{"limit":10}`},
			{"system", "system_health", `{}`},
			{"mission overview", "run_stats", `{"window":"24h"}`},
			{"draft a schedule for audit every weekday at 9", "list_playbooks", `{"query":"audit"}`},
		} {
			step := plan(tc.instr, client)
			if len(step.Calls) != 1 {
				t.Errorf("%s: %q -> %q, want %s", client, tc.instr, step.Text, tc.tool)
				continue
			}
			args, _ := protocol.Canonicalize(step.Calls[0].Arguments)
			if step.Calls[0].Name != tc.tool || string(args) != tc.args {
				t.Errorf("%s: %q -> %s %s, want %s %s", client, tc.instr, step.Calls[0].Name, args, tc.tool, tc.args)
			}
		}
		for _, instr := range []string{"switch to dark mode", "where am I?"} {
			if step := plan(instr, client); len(step.Calls) != 0 || !strings.Contains(step.Text, clientNames[client]) {
				t.Errorf("%s: %q -> %+v, want words naming the client", client, instr, step)
			}
		}
	}
	// The failed runs, answered as a list a person can act on.
	runs := `{"runs":[{"id":"1c4f61d7-0000-4000-8000-000000000001","playbook":"audit-repo","status":"failed","error":"model_failure: down"}],"hasMore":true}`
	done := []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "list_runs"}}},
		{Role: model.RoleTool, ToolCallID: "c1", Content: runs},
	}
	text := plan("show the failed runs", protocol.ClientCLI, done...).Text
	for _, want := range []string{"Failed runs:", "audit-repo `1c4f61d7` (failed): model_failure: down", "`studio runs list --status failed` lists them all"} {
		if !strings.Contains(text, want) {
			t.Errorf("the CLI's failed runs lack %q:\n%s", want, text)
		}
	}
	// The draft, proposed paused once the playbook is found.
	found := []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "list_playbooks"}}},
		{Role: model.RoleTool, ToolCallID: "c1", Content: `{"playbooks":[{"name":"summarize-failed-runs"}]}`},
	}
	step := plan("draft a schedule for summarize every weekday at 9", protocol.ClientCLI, found...)
	args, _ := protocol.Canonicalize(step.Calls[0].Arguments)
	if step.Calls[0].Name != "create_schedule" || string(args) != `{"cron":"0 9 * * 1-5","enabled":false,"name":"summarize-failed-runs-weekdays-0900","playbook":"summarize-failed-runs"}` {
		t.Errorf("the CLI's draft: %s %s", step.Calls[0].Name, args)
	}
	// The cockpit, named or not, still navigates.
	for _, client := range []protocol.ClientKind{"", protocol.ClientCockpit} {
		if step := plan("show the failed runs", client); len(step.Calls) != 1 || step.Calls[0].Name != "navigate" {
			t.Errorf("%q client: %+v", client, step)
		}
	}
}
