package policy_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/studio/operator/internal/policy"
)

var update = flag.Bool("update", false, "rewrite the generated sections of docs/teams.md")

// TestPolicyDocIsFresh: docs/teams.md prints the role table, the
// built-in policies, the four-eyes policy, the schema and the example
// team file as the code has them, and the README the example team file
// (go test ./internal/policy -run PolicyDoc -update).
func TestPolicyDocIsFresh(t *testing.T) {
	const path = "../../docs/teams.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	examples, err := os.ReadFile("../../docs/examples/team-policy.cedar")
	if err != nil {
		t.Fatal(err)
	}
	fence := func(lang, s string) string { return "```" + lang + "\n" + strings.TrimRight(s, "\n") + "\n```\n" }
	doc := string(b)
	for _, sec := range []struct{ name, body string }{
		{"examples", fence("cedar", string(examples))},
		{"roles", policy.RoleTable(policy.Default())},
		{"builtin", fence("cedar", policy.BuiltinText(nil))},
		{"foureyes", fence("cedar", strings.TrimPrefix(strings.TrimPrefix(policy.BuiltinText([]string{"LEVEL"}), policy.BuiltinText(nil)), "\n"))},
		{"schema", fence("cedar", policy.SchemaText())},
	} {
		begin, end := "<!-- policy:"+sec.name+":begin -->\n", "<!-- policy:"+sec.name+":end -->"
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s has no %q … %q section", path, begin, end)
		}
		doc = doc[:i+len(begin)] + sec.body + doc[j:]
	}
	refresh(t, path, string(b), doc)

	// The README's Teams section prints the same two examples.
	const readme = "../../README.md"
	rb, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	r := string(rb)
	begin, end := "<!-- policy:examples:begin -->\n", "<!-- policy:examples:end -->"
	i, j := strings.Index(r, begin), strings.Index(r, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q section", readme, begin, end)
	}
	refresh(t, readme, r, r[:i+len(begin)]+fence("cedar", string(examples))+r[j:])
}

// TestAdminRiskRuleIsPrintedFromItsSource: docs/protocol.md and the
// README print the one rule for commands of risk admin as the built-in
// policies say it.
func TestAdminRiskRuleIsPrintedFromItsSource(t *testing.T) {
	for _, path := range []string{"../../docs/protocol.md", "../../README.md", "../../docs/teams.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		const begin, end = "<!-- policy:admin-risk:begin -->\n", "<!-- policy:admin-risk:end -->"
		doc := string(b)
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s has no %q … %q section", path, begin, end)
		}
		refresh(t, path, doc, doc[:i+len(begin)]+policy.AdminRiskRule+"\n"+doc[j:])
	}
	if !strings.Contains(policy.BuiltinText(nil), "// A command of risk admin") {
		t.Fatal("the built-in policies do not say the rule")
	}
}

// refresh fails for a stale generated file, or rewrites it with -update.
func refresh(t *testing.T, path, was, want string) {
	t.Helper()
	if want == was {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is stale: go test ./internal/policy -run 'PolicyDoc|AdminRisk' -update", path)
}
