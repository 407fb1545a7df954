package protocol

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Effect kinds (docs/design.md §8).
const (
	EffectNavigate = "navigate"
	EffectSelect   = "select"
	EffectPrefill  = "prefill"
	EffectTheme    = "theme"
)

// Spaces are the cockpit's six spaces, in rail order (docs/design.md §8).
var Spaces = []string{"mission", "designer", "library", "history", "schedules", "system"}

// SelectableSpaces are the spaces a select effect may target (not system).
var SelectableSpaces = []string{"mission", "designer", "library", "history", "schedules"}

// Forms are the forms a prefill effect may fill.
var Forms = []string{"schedule", "workflow", "playbook"}

// Themes are the two cockpit themes.
var Themes = []string{"light", "dark"}

// Effect is the protocol's effect union (docs/protocol.md §3). Only the
// fields of its Kind may be set; Validate enforces that, and the JSON form
// carries exactly those fields.
type Effect struct {
	Kind      string
	Space     string
	Params    map[string]any // navigate: string, integer, bool or []string values
	Selection map[string]string
	Form      string
	Values    map[string]any
	Theme     string
}

type navigateWire struct {
	Kind   string         `json:"kind"`
	Space  string         `json:"space"`
	Params map[string]any `json:"params"`
}

type selectWire struct {
	Kind      string            `json:"kind"`
	Space     string            `json:"space"`
	Selection map[string]string `json:"selection"`
}

type prefillWire struct {
	Kind   string         `json:"kind"`
	Form   string         `json:"form"`
	Values map[string]any `json:"values"`
}

type themeWire struct {
	Kind  string `json:"kind"`
	Theme string `json:"theme"`
}

// MarshalJSON writes exactly the fields of the effect's kind.
func (e Effect) MarshalJSON() ([]byte, error) {
	opts := json.Deterministic(true)
	switch e.Kind {
	case EffectNavigate:
		params := e.Params
		if params == nil {
			params = map[string]any{}
		}
		return json.Marshal(navigateWire{e.Kind, e.Space, params}, opts)
	case EffectSelect:
		return json.Marshal(selectWire{e.Kind, e.Space, e.Selection}, opts)
	case EffectPrefill:
		return json.Marshal(prefillWire{e.Kind, e.Form, e.Values}, opts)
	case EffectTheme:
		return json.Marshal(themeWire{e.Kind, e.Theme}, opts)
	}
	return nil, fmt.Errorf("unknown effect kind %q", e.Kind)
}

// UnmarshalJSON strictly decodes an effect by its kind.
func (e *Effect) UnmarshalJSON(data []byte) error {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return err
	}
	switch head.Kind {
	case EffectNavigate:
		var w navigateWire
		if err := Unmarshal(data, &w); err != nil {
			return err
		}
		*e = Effect{Kind: w.Kind, Space: w.Space, Params: w.Params}
		if e.Params == nil {
			e.Params = map[string]any{}
		}
	case EffectSelect:
		var w selectWire
		if err := Unmarshal(data, &w); err != nil {
			return err
		}
		*e = Effect{Kind: w.Kind, Space: w.Space, Selection: w.Selection}
	case EffectPrefill:
		var w prefillWire
		if err := Unmarshal(data, &w); err != nil {
			return err
		}
		*e = Effect{Kind: w.Kind, Form: w.Form, Values: w.Values}
	case EffectTheme:
		var w themeWire
		if err := Unmarshal(data, &w); err != nil {
			return err
		}
		*e = Effect{Kind: w.Kind, Theme: w.Theme}
	default:
		return Errorf(Validation, "unknown effect kind %q", head.Kind)
	}
	return e.Validate()
}

// Validate checks the effect against the union: kind, enums, and that
// no field of another kind is set. Route-level checks live in package spaces.
func (e Effect) Validate() error {
	bad := func(format string, args ...any) error { return Errorf(Validation, format, args...) }
	switch e.Kind {
	case EffectNavigate:
		if !slices.Contains(Spaces, e.Space) {
			return bad("navigate space %q is not one of the six spaces", e.Space)
		}
		if e.Selection != nil || e.Form != "" || e.Values != nil || e.Theme != "" {
			return bad("navigate effect carries fields of another kind")
		}
		for k, v := range e.Params {
			if !validParamValue(v) {
				return bad("navigate param %q must be a string, integer, boolean or list of strings", k)
			}
		}
	case EffectSelect:
		if !slices.Contains(SelectableSpaces, e.Space) {
			return bad("select is not allowed on space %q", e.Space)
		}
		if len(e.Selection) == 0 {
			return bad("select effect needs a selection")
		}
		if e.Params != nil || e.Form != "" || e.Values != nil || e.Theme != "" {
			return bad("select effect carries fields of another kind")
		}
	case EffectPrefill:
		if !slices.Contains(Forms, e.Form) {
			return bad("prefill form %q is not one of %v", e.Form, Forms)
		}
		if e.Values == nil {
			return bad("prefill effect needs values")
		}
		if e.Space != "" || e.Params != nil || e.Selection != nil || e.Theme != "" {
			return bad("prefill effect carries fields of another kind")
		}
	case EffectTheme:
		if !slices.Contains(Themes, e.Theme) {
			return bad("theme %q is not light or dark", e.Theme)
		}
		if e.Space != "" || e.Params != nil || e.Selection != nil || e.Form != "" || e.Values != nil {
			return bad("theme effect carries fields of another kind")
		}
	default:
		return bad("unknown effect kind %q", e.Kind)
	}
	return nil
}

func validParamValue(v any) bool {
	switch x := v.(type) {
	case string, bool, int, int64:
		return true
	case float64:
		return x == float64(int64(x))
	case []string:
		return true
	case []any:
		for _, s := range x {
			if _, ok := s.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// ResourceVersion names a proposal's target: {kind, id, version}. The
// protocol calls the version opaque (docs/design.md §4) and StateDB keeps
// it as text; every Studio resource counts its versions in integers, so on
// the wire it is a JSON integer like every resource's own version. A
// decimal string (the contract's spelling, and frames written before this
// rule) is accepted on input.
type ResourceVersion struct {
	Kind    string
	ID      string
	Version string
}

type resourceVersionWire struct {
	Kind    string         `json:"kind"`
	ID      string         `json:"id"`
	Version jsontext.Value `json:"version"`
}

// MarshalJSON writes the version as a JSON integer (a string if it is not one).
func (r ResourceVersion) MarshalJSON() ([]byte, error) {
	v, err := json.Marshal(r.Version)
	if err != nil {
		return nil, err
	}
	if VersionNumber(r.Version) {
		v = jsontext.Value(r.Version)
	}
	return json.Marshal(resourceVersionWire{r.Kind, r.ID, v}, json.Deterministic(true))
}

// UnmarshalJSON strictly reads {kind, id, version}, the version an integer
// or a string.
func (r *ResourceVersion) UnmarshalJSON(data []byte) error {
	var w resourceVersionWire
	if err := Unmarshal(data, &w); err != nil {
		return err
	}
	v, err := VersionText(w.Version)
	if err != nil {
		return Errorf(Validation, "target version: %v", err)
	}
	*r = ResourceVersion{Kind: w.Kind, ID: w.ID, Version: v}
	return nil
}

// VersionNumber reports whether s is a version in canonical integer form
// (what the wire writes as a JSON number).
func VersionNumber(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && strconv.FormatInt(n, 10) == s && n >= 0
}

// VersionText reads a version given as a JSON integer or string into its
// stored text form.
func VersionText(v jsontext.Value) (string, error) {
	switch v.Kind() {
	case '0':
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 {
			return "", fmt.Errorf("%s is not a non-negative integer", v)
		}
		return strconv.FormatInt(n, 10), nil
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	return "", fmt.Errorf("must be an integer or a string")
}

// Proposal risks, from the tool's execution class.
const (
	RiskMutate  = "mutate"
	RiskExecute = "execute"
	RiskAdmin   = "admin"
)

// CommandProposal is what the human confirms (docs/design.md §9; §4 adds the
// command type and hash the client needs to confirm).
type CommandProposal struct {
	ID             string           `json:"id"`
	CommandType    string           `json:"commandType"`
	Command        jsontext.Value   `json:"command"`
	CommandHash    string           `json:"commandHash"`
	Risk           string           `json:"risk"`
	Summary        string           `json:"summary"`
	Target         *ResourceVersion `json:"target"`
	IdempotencyKey string           `json:"idempotencyKey"`
	ExpiresAt      float64          `json:"expiresAt"`
	// Impact (optional): destructive (loses work or data) or irreversible
	// (removes something for good; the cockpit asks for TargetName to be
	// typed before Confirm). Absent for neither.
	Impact string `json:"impact,omitzero"`
	// TargetName (optional) is the target's human name when proposed.
	TargetName string `json:"targetName,omitzero"`
	// Amends is the proposal this one replaces: the operator amended its
	// command.
	Amends *string `json:"amends,omitempty"`
	// Origin is how it came to be: ProposalOriginTurn (a model's or an
	// agent's turn proposed it) or ProposalOriginRequest (a person asked
	// for the command directly and it awaits another approver; there is
	// no model turn to stop). Absent in frames stored before it was kept:
	// read as a turn's.
	Origin string `json:"origin,omitzero"`
}

// Proposal impacts.
const (
	ImpactDestructive  = "destructive"
	ImpactIrreversible = "irreversible"
)

// Proposal origins.
const (
	ProposalOriginTurn    = "turn"
	ProposalOriginRequest = "request"
)

func (p CommandProposal) validate() error {
	if p.ID == "" || p.CommandType == "" || p.CommandHash == "" || p.IdempotencyKey == "" {
		return fmt.Errorf("proposal needs id, commandType, commandHash and idempotencyKey")
	}
	switch p.Risk {
	case RiskMutate, RiskExecute, RiskAdmin:
	default:
		return fmt.Errorf("proposal risk %q is unknown", p.Risk)
	}
	if p.Command.Kind() != '{' {
		return fmt.Errorf("proposal command must be an object")
	}
	if p.Impact != "" && p.Impact != ImpactDestructive && p.Impact != ImpactIrreversible {
		return fmt.Errorf("proposal impact %q is unknown", p.Impact)
	}
	if p.Origin != "" && p.Origin != ProposalOriginTurn && p.Origin != ProposalOriginRequest {
		return fmt.Errorf("proposal origin %q is unknown", p.Origin)
	}
	return nil
}
