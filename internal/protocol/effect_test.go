package protocol_test

import (
	"slices"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/studio/operator/internal/protocol"
)

func TestEffectValidate(t *testing.T) {
	t.Parallel()
	sel := map[string]string{"runId": "r-1"}
	vals := map[string]any{"name": "nightly"}
	for _, tc := range []struct {
		name string
		e    protocol.Effect
		ok   bool
	}{
		{"navigate", protocol.Effect{Kind: "navigate", Space: "mission", Params: map[string]any{"view": "fleet", "page": 2, "n": int64(3), "f": float64(4), "live": true, "tags": []string{"a"}, "more": []any{"b"}}}, true},
		{"navigate without params", protocol.Effect{Kind: "navigate", Space: "designer"}, true},
		{"navigate to fleet", protocol.Effect{Kind: "navigate", Space: "fleet"}, false},
		{"navigate float param", protocol.Effect{Kind: "navigate", Space: "mission", Params: map[string]any{"x": 1.5}}, false},
		{"navigate object param", protocol.Effect{Kind: "navigate", Space: "mission", Params: map[string]any{"x": map[string]any{}}}, false},
		{"navigate mixed list", protocol.Effect{Kind: "navigate", Space: "mission", Params: map[string]any{"x": []any{"a", 1.0}}}, false},
		{"navigate null param", protocol.Effect{Kind: "navigate", Space: "mission", Params: map[string]any{"x": nil}}, false},
		{"navigate with selection", protocol.Effect{Kind: "navigate", Space: "mission", Selection: sel}, false},
		{"navigate with form", protocol.Effect{Kind: "navigate", Space: "mission", Form: "schedule"}, false},
		{"navigate with values", protocol.Effect{Kind: "navigate", Space: "mission", Values: vals}, false},
		{"navigate with theme", protocol.Effect{Kind: "navigate", Space: "mission", Theme: "dark"}, false},
		{"select", protocol.Effect{Kind: "select", Space: "history", Selection: sel}, true},
		{"select on system", protocol.Effect{Kind: "select", Space: "system", Selection: sel}, false},
		{"select on nothing", protocol.Effect{Kind: "select", Selection: sel}, false},
		{"select empty", protocol.Effect{Kind: "select", Space: "mission", Selection: map[string]string{}}, false},
		{"select with params", protocol.Effect{Kind: "select", Space: "mission", Selection: sel, Params: map[string]any{}}, false},
		{"select with values", protocol.Effect{Kind: "select", Space: "mission", Selection: sel, Values: vals}, false},
		{"select with form", protocol.Effect{Kind: "select", Space: "mission", Selection: sel, Form: "playbook"}, false},
		{"select with theme", protocol.Effect{Kind: "select", Space: "mission", Selection: sel, Theme: "light"}, false},
		{"prefill", protocol.Effect{Kind: "prefill", Form: "workflow", Values: map[string]any{}}, true},
		{"prefill unknown form", protocol.Effect{Kind: "prefill", Form: "run", Values: vals}, false},
		{"prefill without values", protocol.Effect{Kind: "prefill", Form: "schedule"}, false},
		{"prefill with space", protocol.Effect{Kind: "prefill", Form: "schedule", Values: vals, Space: "schedules"}, false},
		{"prefill with params", protocol.Effect{Kind: "prefill", Form: "schedule", Values: vals, Params: map[string]any{}}, false},
		{"prefill with selection", protocol.Effect{Kind: "prefill", Form: "schedule", Values: vals, Selection: sel}, false},
		{"prefill with theme", protocol.Effect{Kind: "prefill", Form: "schedule", Values: vals, Theme: "dark"}, false},
		{"theme", protocol.Effect{Kind: "theme", Theme: "light"}, true},
		{"theme unknown", protocol.Effect{Kind: "theme", Theme: "blue"}, false},
		{"theme with space", protocol.Effect{Kind: "theme", Theme: "dark", Space: "system"}, false},
		{"theme with params", protocol.Effect{Kind: "theme", Theme: "dark", Params: map[string]any{}}, false},
		{"theme with selection", protocol.Effect{Kind: "theme", Theme: "dark", Selection: sel}, false},
		{"theme with form", protocol.Effect{Kind: "theme", Theme: "dark", Form: "schedule"}, false},
		{"theme with values", protocol.Effect{Kind: "theme", Theme: "dark", Values: vals}, false},
		{"unknown kind", protocol.Effect{Kind: "open_url"}, false},
		{"no kind", protocol.Effect{}, false},
	} {
		err := tc.e.Validate()
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("%s: Validate = %v, want validation", tc.name, err)
		}
	}
	// Every space may be navigated to; select covers all but system.
	for _, s := range protocol.Spaces {
		if err := (protocol.Effect{Kind: "navigate", Space: s}).Validate(); err != nil {
			t.Errorf("navigate %s: %v", s, err)
		}
		err := protocol.Effect{Kind: "select", Space: s, Selection: sel}.Validate()
		if (s == "system") != (err != nil) {
			t.Errorf("select %s: %v", s, err)
		}
	}
	if len(protocol.Spaces) != 6 || slices.Contains(protocol.SelectableSpaces, "system") || len(protocol.SelectableSpaces) != 5 {
		t.Fatalf("spaces %v, selectable %v", protocol.Spaces, protocol.SelectableSpaces)
	}
}

func TestEffectJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"kind":"navigate","space":"mission","params":{"view":"fleet"}}`, true},
		{`{"kind":"navigate","space":"mission"}`, true},
		{`{"kind":"select","space":"library","selection":{"playbookId":"p"}}`, true},
		{`{"kind":"prefill","form":"playbook","values":{"name":"x"}}`, true},
		{`{"kind":"theme","theme":"dark"}`, true},
		// Fields of another kind are unknown members.
		{`{"kind":"select","space":"mission","selection":{"runId":"r"},"params":{}}`, false},
		{`{"kind":"navigate","space":"mission","theme":"dark"}`, false},
		{`{"kind":"theme","theme":"dark","space":"mission"}`, false},
		{`{"kind":"prefill","form":"schedule","values":{},"selection":{"a":"b"}}`, false},
		{`{"kind":"select","space":"system","selection":{"a":"b"}}`, false},
		{`{"kind":"select","space":"mission","selection":{"a":1}}`, false},
		{`{"kind":"navigate","kind":"theme","theme":"dark"}`, false},
		{`{"space":"mission"}`, false},
		{`{"kind":"launch"}`, false},
		{`[]`, false},
	} {
		var e protocol.Effect
		err := protocol.Unmarshal([]byte(tc.in), &e)
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !tc.ok {
			if !protocol.IsCode(err, protocol.Validation) {
				t.Errorf("%s: %v, want validation", tc.in, err)
			}
			continue
		}
		// Marshal writes exactly the fields of the kind.
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back protocol.Effect
		if err := protocol.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s re-encoded as %s: %v", tc.in, b, err)
		}
	}
	if _, err := json.Marshal(protocol.Effect{Kind: "bogus"}); err == nil {
		t.Fatal("an effect of unknown kind marshalled")
	}
}
