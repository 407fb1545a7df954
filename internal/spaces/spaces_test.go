package spaces

import (
	"slices"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

func TestSixSpacesInRailOrder(t *testing.T) {
	t.Parallel()
	if got := Default.SpaceIDs(); !slices.Equal(got, protocol.Spaces) {
		t.Fatalf("spaces %v, want %v", got, protocol.Spaces)
	}
	sys, _ := Default.Space("system")
	if slices.Contains(sys.Effects, protocol.EffectSelect) {
		t.Fatal("system must not accept select")
	}
	for _, f := range Default.Forms {
		sp, ok := Default.Space(f.Space)
		if !ok || sp.Form != f.ID || !slices.Contains(sp.Effects, protocol.EffectPrefill) {
			t.Errorf("form %s is not reachable in space %s", f.ID, f.Space)
		}
	}
}

func TestValidateEffect(t *testing.T) {
	t.Parallel()
	nav := func(space string, params map[string]any) protocol.Effect {
		return protocol.Effect{Kind: "navigate", Space: space, Params: params}
	}
	for _, tc := range []struct {
		name string
		e    protocol.Effect
		ok   bool
	}{
		{"fleet of failed runs", nav("mission", map[string]any{"view": "fleet", "status": "failed"}), true},
		{"no params", nav("schedules", nil), true},
		{"bool param", nav("schedules", map[string]any{"enabled": false}), true},
		{"unknown param", nav("mission", map[string]any{"url": "https://example.com"}), false},
		{"enum outside", nav("mission", map[string]any{"status": "exploded"}), false},
		{"wrong type", nav("schedules", map[string]any{"enabled": "yes"}), false},
		{"empty string", nav("library", map[string]any{"q": ""}), false},
		{"fleet is not a space", nav("fleet", nil), false},
		{"select run", protocol.Effect{Kind: "select", Space: "mission", Selection: map[string]string{"run": "r1"}}, true},
		{"select wrong key", protocol.Effect{Kind: "select", Space: "library", Selection: map[string]string{"run": "r1"}}, false},
		{"select system", protocol.Effect{Kind: "select", Space: "system", Selection: map[string]string{"tab": "x"}}, false},
		{"prefill schedule", protocol.Effect{Kind: "prefill", Form: "schedule", Values: map[string]any{"name": "n", "cron": "0 9 * * 1-5", "enabled": true}}, true},
		{"prefill unknown field", protocol.Effect{Kind: "prefill", Form: "schedule", Values: map[string]any{"shell": "rm -rf /"}}, false},
		{"prefill wrong type", protocol.Effect{Kind: "prefill", Form: "schedule", Values: map[string]any{"enabled": "yes"}}, false},
		{"theme", protocol.Effect{Kind: "theme", Theme: "dark"}, true},
		{"theme unknown", protocol.Effect{Kind: "theme", Theme: "sepia"}, false},
	} {
		err := Default.ValidateEffect(tc.e)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("%s: code %s, want validation", tc.name, protocol.CodeOf(err))
		}
	}
}

func TestMatchesRoute(t *testing.T) {
	t.Parallel()
	fleet := protocol.Effect{Kind: "navigate", Space: "mission", Params: map[string]any{"view": "fleet", "status": "failed"}}
	if got := Default.RouteOf(fleet); got != "/?status=failed&view=fleet" {
		t.Fatalf("RouteOf = %q", got)
	}
	for _, tc := range []struct {
		e     protocol.Effect
		route string
		ok    bool
	}{
		{fleet, "/?view=fleet&status=failed", true},
		{fleet, "/?status=failed&view=fleet", true},
		{fleet, "/?view=fleet", false},
		{fleet, "/?view=fleet&status=failed&q=x", false},
		{fleet, "/history?view=fleet&status=failed", false},
		{fleet, "https://evil.example/?view=fleet&status=failed", false},
		{fleet, "", false},
		{protocol.Effect{Kind: "navigate", Space: "schedules", Params: map[string]any{"enabled": true}}, "/schedules?enabled=true", true},
		{protocol.Effect{Kind: "select", Space: "mission", Selection: map[string]string{"run": "r1"}}, "/?view=fleet&run=r1", true},
		{protocol.Effect{Kind: "select", Space: "mission", Selection: map[string]string{"run": "r1"}}, "/?run=r2", false},
		{protocol.Effect{Kind: "prefill", Form: "schedule", Values: map[string]any{"name": "x"}}, "/schedules?form=new", true},
		{protocol.Effect{Kind: "prefill", Form: "schedule", Values: map[string]any{"name": "x"}}, "/library", false},
		{protocol.Effect{Kind: "theme", Theme: "dark"}, "/system?tab=appearance", true},
		{protocol.Effect{Kind: "theme", Theme: "dark"}, "/nowhere", false},
	} {
		err := Default.MatchesRoute(tc.e, tc.route)
		if (err == nil) != tc.ok {
			t.Errorf("%s %v on %q: err = %v, want ok %v", tc.e.Kind, tc.e.Params, tc.route, err, tc.ok)
		}
	}
}

// TestSpacesSpeakToPeople: each space has a subtitle for the page, apart
// from the description written for the model, and a single-letter shortcut
// (typed after "g") of its own.
func TestSpacesSpeakToPeople(t *testing.T) {
	t.Parallel()
	keys := map[string]string{}
	for _, sp := range Default.Spaces {
		if sp.Subtitle == "" || sp.Subtitle == sp.Description {
			t.Errorf("space %s: subtitle %q must be a sentence for people, not the model's description", sp.ID, sp.Subtitle)
		}
		if strings.ContainsAny(sp.Subtitle, "=;") {
			t.Errorf("space %s: subtitle %q reads like a parameter list", sp.ID, sp.Subtitle)
		}
		if len(sp.Shortcut) != 1 || sp.Shortcut < "a" || sp.Shortcut > "z" {
			t.Errorf("space %s: shortcut %q is not one lowercase letter", sp.ID, sp.Shortcut)
		}
		if other, dup := keys[sp.Shortcut]; dup {
			t.Errorf("spaces %s and %s share the shortcut g %s", other, sp.ID, sp.Shortcut)
		}
		keys[sp.Shortcut] = sp.ID
	}
}

// TestIDParamsAreIDs: a param or a selection that names a resource takes
// only the registry's id form; a path, a URL or a query string is a
// validation error, never an effect.
func TestIDParamsAreIDs(t *testing.T) {
	t.Parallel()
	nav := func(space, name string, v any) protocol.Effect {
		return protocol.Effect{Kind: protocol.EffectNavigate, Space: space, Params: map[string]any{name: v}}
	}
	sel := func(space, name, v string) protocol.Effect {
		return protocol.Effect{Kind: protocol.EffectSelect, Space: space, Selection: map[string]string{name: v}}
	}
	for _, tc := range []struct {
		e  protocol.Effect
		ok bool
	}{
		{nav("library", "playbook", "audit-repo"), true},
		{nav("mission", "run", "3f2a9c1e-7b4d-4e2a-9f1c-0d8e7a6b5c4d"), true},
		{nav("library", "playbook", "../../x"), false},
		{nav("library", "playbook", "/etc/passwd"), false},
		{nav("mission", "playbook", "a?b=c"), false},
		{nav("history", "target", "https://evil.example/x"), false},
		{nav("schedules", "schedule", strings.Repeat("a", 65)), false},
		{nav("designer", "workflow", 5), false},
		{nav("library", "q", "../../x"), true}, // a search is text
		{nav("library", "q", strings.Repeat("a", MaxStringParam+1)), false},
		{sel("library", "playbook", "audit-repo"), true},
		{sel("library", "playbook", "../../x"), false},
		{sel("history", "event", "a b"), false},
	} {
		err := Default.ValidateEffect(tc.e)
		if (err == nil) != tc.ok {
			t.Errorf("%s %v %v: err = %v, want ok %v", tc.e.Kind, tc.e.Params, tc.e.Selection, err, tc.ok)
		}
		if err != nil && !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("%v: %v is not validation", tc.e, err)
		}
	}
	for _, sp := range Default.Spaces {
		for _, p := range sp.Params {
			if p.Type == TypeID && p.Pattern != IDPattern {
				t.Errorf("%s.%s: pattern %q", sp.ID, p.Name, p.Pattern)
			}
		}
	}
}
