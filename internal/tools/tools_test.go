package tools_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/store/sqlite/sqlitetest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/tools"
)

func registry(t *testing.T) (*tools.Registry, *studio.Service) {
	t.Helper()
	st := sqlitetest.Open(t, time.Now())
	svc, err := studio.New(studio.Config{Store: st, Maintenance: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Seed(t.Context()); err != nil {
		t.Fatal(err)
	}
	return tools.Default(svc, spaces.Default, time.Now), svc
}

// valid is one valid input per tool; what the test expects it to produce.
var valid = map[string]string{
	"get_current_view":     `{}`,
	"navigate":             `{"space":"mission","params":{"view":"fleet","status":"failed"}}`,
	"select":               `{"space":"library","selection":{"playbook":"audit-repo"}}`,
	"set_theme":            `{"theme":"dark"}`,
	"prefill_form":         `{"form":"schedule","values":{"name":"n","cron":"0 9 * * 1-5"}}`,
	"list_runs":            `{"status":"failed","since":"24h","limit":5}`,
	"get_run":              `{"id":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1"}`,
	"run_stats":            `{"window":"7d"}`,
	"list_playbooks":       `{"query":"audit"}`,
	"get_playbook":         `{"playbook":"audit-repo"}`,
	"list_workflows":       `{}`,
	"get_workflow":         `{"workflow":"release"}`,
	"list_schedules":       `{"enabled":true}`,
	"get_schedule":         `{"schedule":"nightly-audit"}`,
	"list_audit_events":    `{"limit":5}`,
	"system_health":        `{}`,
	"create_playbook":      `{"name":"triage","prompt":"Triage {{input}}"}`,
	"update_playbook":      `{"playbook":"audit-repo","expectedVersion":1,"description":"x"}`,
	"delete_playbook":      `{"playbook":"write-release-notes"}`,
	"create_workflow":      `{"name":"w","steps":[{"playbook":"audit-repo"}]}`,
	"update_workflow":      `{"workflow":"w","expectedVersion":1,"description":"x"}`,
	"launch_workflow":      `{"workflow":"w"}`,
	"delete_workflow":      `{"workflow":"w"}`,
	"launch_playbook":      `{"playbook":"audit-repo","args":{"repo":"x"}}`,
	"cancel_run":           `{"run":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1"}`,
	"retry_run":            `{"run":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1"}`,
	"create_schedule":      `{"name":"s","cron":"0 9 * * *","playbook":"audit-repo","args":{"repo":"x"}}`,
	"update_schedule":      `{"schedule":"nightly-audit","expectedVersion":1,"cron":"0 3 * * *"}`,
	"set_schedule_enabled": `{"schedule":"nightly-audit","enabled":false}`,
	"delete_schedule":      `{"schedule":"nightly-audit"}`,
	"run_maintenance":      `{"action":"vacuum"}`,
	"reconcile_proposal":   `{"proposal":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1","outcome":"failed"}`,
}

// wrongEnum replaces an enum field with a value outside it, per tool.
var wrongEnum = map[string]string{
	"navigate":             `{"space":"fleet"}`,
	"select":               `{"space":"system","selection":{"tab":"x"}}`,
	"set_theme":            `{"theme":"sepia"}`,
	"prefill_form":         `{"form":"invoice","values":{"name":"n"}}`,
	"list_runs":            `{"status":"exploded"}`,
	"run_stats":            `{"window":"1y"}`,
	"run_maintenance":      `{"action":"defragment"}`,
	"reconcile_proposal":   `{"proposal":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1","outcome":"maybe"}`,
	"set_schedule_enabled": `{"schedule":"nightly-audit","enabled":"off"}`,
}

// tooLong puts an over-long string in a string field, per tool.
func tooLong(id string) string {
	long := strings.Repeat("x", 70_000)
	switch id {
	case "get_current_view", "system_health", "list_workflows", "list_audit_events", "list_playbooks", "list_schedules":
		return `{"query":"` + long + `"}` // unknown or over-long: refused either way
	case "navigate":
		return `{"space":"library","params":{"q":"` + long + `"}}`
	case "select":
		return `{"space":"library","selection":{"playbook":"` + long + `"}}`
	case "prefill_form":
		return `{"form":"schedule","values":{"name":"` + long + `"}}`
	case "set_theme":
		return `{"theme":"` + long + `"}`
	case "list_runs":
		return `{"playbook":"` + long + `"}`
	case "get_run", "cancel_run", "retry_run":
		return `{"` + map[string]string{"get_run": "id"}[id] + map[bool]string{true: "", false: "run"}[id == "get_run"] + `":"` + long + `"}`
	case "run_stats":
		return `{"window":"` + long + `"}`
	case "get_playbook", "launch_playbook", "delete_playbook":
		return `{"playbook":"` + long + `"}`
	case "get_workflow", "launch_workflow", "delete_workflow":
		return `{"workflow":"` + long + `"}`
	case "get_schedule", "set_schedule_enabled", "delete_schedule":
		return `{"schedule":"` + long + `","enabled":true}`
	case "create_playbook":
		return `{"name":"` + long + `","prompt":"p"}`
	case "update_playbook":
		return `{"playbook":"audit-repo","expectedVersion":1,"description":"` + long + `"}`
	case "create_workflow":
		return `{"name":"` + long + `","steps":[{"playbook":"audit-repo"}]}`
	case "update_workflow":
		return `{"workflow":"w","expectedVersion":1,"description":"` + long + `"}`
	case "create_schedule":
		return `{"name":"` + long + `","cron":"0 9 * * *","playbook":"audit-repo"}`
	case "update_schedule":
		return `{"schedule":"nightly-audit","expectedVersion":1,"name":"` + long + `"}`
	case "run_maintenance":
		return `{"action":"vacuum","conversationId":"` + long + `"}`
	case "reconcile_proposal":
		return `{"proposal":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1","outcome":"failed","note":"` + long + `"}`
	}
	return ""
}

func TestEveryToolValidAndInvalidInput(t *testing.T) {
	t.Parallel()
	reg, svc := registry(t)
	ctx := context.Background()
	before, err := svc.ListAudit(ctx, studio.AuditQuery{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	env := tools.Env{View: protocol.ContextSnapshot{Space: "mission", Route: "/"}}
	for _, spec := range reg.Specs() {
		in, ok := valid[spec.ID]
		if !ok {
			t.Errorf("tool %s has no valid example", spec.ID)
			continue
		}
		out, err := spec.Run(ctx, env, []byte(in))
		switch {
		case spec.Class == tools.ClassRead:
			// A read may find nothing (not_found); it must not be a validation error.
			if err != nil && protocol.IsCode(err, protocol.Validation) {
				t.Errorf("%s valid input: %v", spec.ID, err)
			}
		case spec.Class == tools.ClassNavigate || spec.Class == tools.ClassDraft:
			if err != nil || out.Effect == nil {
				t.Errorf("%s valid input: %+v %v", spec.ID, out, err)
			}
		default:
			if err != nil || out.Command == nil {
				t.Errorf("%s valid input: %+v %v", spec.ID, out, err)
			}
		}
		bad := map[string]string{
			"extra field": strings.TrimSuffix(in, "}") + map[bool]string{true: "", false: ","}[in == "{}"] + `"url":"https://evil.example"}`,
			"too long":    tooLong(spec.ID),
			"not object":  `["x"]`,
		}
		if w, ok := wrongEnum[spec.ID]; ok {
			bad["wrong enum"] = w
		}
		for what, arg := range bad {
			if _, err := spec.Run(ctx, env, []byte(arg)); !protocol.IsCode(err, protocol.Validation) {
				t.Errorf("%s %s: err = %v, want validation", spec.ID, what, err)
			}
		}
	}
	after, err := svc.ListAudit(ctx, studio.AuditQuery{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Events) != len(before.Events) {
		t.Fatalf("running tools changed the application: %d audit rows, then %d", len(before.Events), len(after.Events))
	}
}

func TestToolCatalogIsWholeAndTyped(t *testing.T) {
	t.Parallel()
	reg, _ := registry(t)
	want := []string{"list_runs", "get_run", "run_stats", "list_playbooks", "get_playbook", "list_workflows", "get_workflow",
		"list_schedules", "get_schedule", "system_health", "list_audit_events", "get_current_view", "navigate", "select",
		"set_theme", "prefill_form"}
	want = append(want, studio.CommandTypes()...)
	for _, id := range want {
		spec, ok := reg.Lookup(id)
		if !ok {
			t.Errorf("tool %s missing", id)
			continue
		}
		if spec.InputSchema.Kind() != '{' || spec.Operation == "" || spec.Title == "" || spec.Description == "" {
			t.Errorf("tool %s is incomplete: %+v", id, spec)
		}
	}
	for _, ct := range studio.Commands() {
		spec, _ := reg.Lookup(ct.Type)
		if string(spec.Class) != ct.Risk || spec.Class.RunsInTurn() || spec.Class.Mode() != "draft" {
			t.Errorf("command tool %s has class %s, risk %s", ct.Type, spec.Class, ct.Risk)
		}
	}
	if len(reg.Specs()) != len(want) {
		t.Errorf("%d tools, want %d", len(reg.Specs()), len(want))
	}
	if m := tools.ClassRead.Mode(); m != "read" {
		t.Errorf("read mode %q", m)
	}
}

// TestToolCatalogPerClientShared: a client that applies effects is offered
// every tool, one that does not every tool but the effects, in
// registration order; and every turn shares its client's catalog instead
// of building one (each running turn's request holds it, live heap the
// collector marks), so taking it allocates nothing and an append to it
// does not write into the shared one.
func TestToolCatalogPerClientShared(t *testing.T) { // not parallel: AllocsPerRun
	reg, _ := registry(t)
	for _, client := range []protocol.ClientKind{protocol.ClientCockpit, protocol.ClientCLI, protocol.ClientMCP} {
		var want []string
		for _, s := range reg.Specs() {
			if !s.Class.IsEffect() || client.AppliesEffects() {
				want = append(want, s.ID)
			}
		}
		cat := reg.Catalog(client)
		var got []string
		for _, tool := range cat {
			spec, _ := reg.Lookup(tool.Name)
			if tool.Description != spec.Title+". "+spec.Description || string(tool.Schema) != string(spec.InputSchema) {
				t.Errorf("%s: tool %s is not its spec: %+v", client, tool.Name, tool)
			}
			got = append(got, tool.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s is offered %v, want %v", client, got, want)
		}
		if n := testing.AllocsPerRun(100, func() { reg.Catalog(client) }); n != 0 {
			t.Errorf("taking %s's catalog allocates %.0f times: built per turn", client, n)
		}
		grown := append(cat, model.Tool{Name: "extra"})
		if again := reg.Catalog(client); len(again) != len(want) || &grown[0] == &again[0] {
			t.Errorf("an append to %s's catalog changed the shared one", client)
		}
	}
}

// Nothing a tool spec says lets the model choose a URL, a shell command, SQL
// or a file path (docs/design.md §7).
func TestNoSpecOffersURLShellSQLOrPath(t *testing.T) {
	t.Parallel()
	reg, _ := registry(t)
	forbidden := []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(https?|file|ftp)://`),
		regexp.MustCompile(`(?i)/api/`),
		regexp.MustCompile(`(?i)\b(GET|POST|PUT|PATCH|DELETE) /`),
		regexp.MustCompile(`(?i)\b(select \S+ from|insert into|update \S+ set|delete from|drop table)\b`),
		regexp.MustCompile(`(?i)(\$\(|\bsudo\b|\bbash\b|\bsh -c\b|&&|\|\s*sh\b|\brm -)`),
		regexp.MustCompile(`(?i)(\B/(etc|home|usr|var|tmp|root)/|[a-z]:\\\\|\.db\b|\.sqlite\b)`),
	}
	// No input field is a place for one.
	inputField := regexp.MustCompile(`(?i)"(url|uri|endpoint|path|command|shell|sql|file|filename|script|exec)"\s*:`)
	for _, spec := range reg.Specs() {
		text := strings.Join([]string{spec.ID, spec.Title, spec.Description, spec.Operation, string(spec.InputSchema), string(spec.OutputSchema)}, "\n")
		for _, re := range forbidden {
			if m := re.FindString(text); m != "" {
				t.Errorf("tool %s offers %q", spec.ID, m)
			}
		}
		if m := inputField.FindString(string(spec.InputSchema)); m != "" {
			t.Errorf("tool %s has an input field %s", spec.ID, m)
		}
	}
}

// A command or effect whose arguments hold a secret-shaped value is refused
// before it becomes a proposal or an effect, the value never quoted; the
// same arguments without it pass.
func TestSecretsNeverBecomeCommandsOrEffects(t *testing.T) {
	t.Parallel()
	reg, _ := registry(t)
	ctx := context.Background()
	env := tools.Env{View: protocol.ContextSnapshot{Space: "mission", Route: "/"}}
	secrets := []string{"sk-proj-4fX9aQ2LmZ7bT1cR8dV3eW6gH0jK5nP2sU7yB9", "run_sk-ant-api03-Xy7Qm2Lp9Rt4Vw1Zb8Nc3Jd6Kf0Hg5S",
		"ghp_9aZ8bY7cX6dW5eV4fU3gT2hS1iR0jQ9kP8lO", "AKIAIOSFODNN7EXAMPLE", "password=hunter2", "https://admin:hunter2@db.example/x",
		"xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"}
	tried := 0
	for _, spec := range reg.Specs() {
		if spec.Class == tools.ClassRead {
			continue
		}
		in := valid[spec.ID]
		if _, err := spec.Run(ctx, env, []byte(in)); err != nil {
			t.Fatalf("%s valid input: %v", spec.ID, err)
		}
		// Every string value of the valid example, in turn, holds a secret.
		for _, s := range secrets {
			for _, arg := range withSecret(in, s) {
				tried++
				_, err := spec.Run(ctx, env, []byte(arg))
				if pe := protocol.ErrorOf(err); pe.Code != protocol.Validation || pe.Details["reason"] != "secret_in_arguments" {
					t.Errorf("%s %s: err = %v, want the validation error about a secret", spec.ID, arg, err)
					continue
				}
				if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), s) {
					t.Errorf("%s: the refusal quotes the secret: %v", spec.ID, err)
				}
			}
		}
	}
	t.Logf("%d secret-bearing arguments tried, all refused", tried)
	if tried < 50 {
		t.Fatalf("only %d arguments tried", tried)
	}
}

// withSecret returns the JSON object in with each of its string values, in
// turn, replaced by secret.
func withSecret(in, secret string) []string {
	var out []string
	quoted, _ := json.Marshal(secret)
	for i := 0; i < len(in); i++ {
		if in[i] != ':' {
			continue
		}
		j := i + 1
		for j < len(in) && in[j] == ' ' {
			j++
		}
		if j >= len(in) || in[j] != '"' {
			continue
		}
		end := strings.IndexByte(in[j+1:], '"')
		if end < 0 {
			continue
		}
		out = append(out, in[:j]+string(quoted)+in[j+1+end+1:])
	}
	return out
}
