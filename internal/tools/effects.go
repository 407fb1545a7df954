package tools

import (
	"context"
	"sort"

	"github.com/invopop/jsonschema"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
)

// NavigateInput is the navigate tool's input: the navigate effect's fields.
type NavigateInput struct {
	Space  string         `json:"space" jsonschema_description:"The space to open. Fleet (the runs table) is space mission with params view=fleet."`
	Params map[string]any `json:"params,omitempty" jsonschema_description:"Route params of that space; see each space's params."`
}

// JSONSchemaExtend takes the space enum and the params from the route registry.
func (NavigateInput) JSONSchemaExtend(s *jsonschema.Schema) {
	setEnum(s, "space", spaces.Default.SpaceIDs())
	if p, ok := s.Properties.Get("params"); ok {
		p.Properties = jsonschema.NewProperties()
		p.AdditionalProperties = jsonschema.FalseSchema
		for _, name := range spaces.Default.ParamNames() {
			p.Properties.Set(name, paramSchema(name))
		}
	}
}

// paramSchema describes a param name across the spaces that have it.
func paramSchema(name string) *jsonschema.Schema {
	s := &jsonschema.Schema{}
	var inSpaces []string
	enum := map[string]bool{}
	for _, sp := range spaces.Default.Spaces {
		for _, p := range sp.Params {
			if p.Name != name {
				continue
			}
			inSpaces = append(inSpaces, sp.ID)
			s.Description = p.Description
			switch p.Type {
			case spaces.TypeID:
				s.Type = "string"
				s.Pattern = p.Pattern
			case spaces.TypeBool:
				s.Type = "boolean"
			case spaces.TypeInt:
				s.Type = "integer"
			default:
				s.Type = "string"
			}
			for _, v := range p.Values {
				enum[v] = true
			}
		}
	}
	if len(enum) > 0 {
		vals := make([]string, 0, len(enum))
		for v := range enum {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		for _, v := range vals {
			s.Enum = append(s.Enum, v)
		}
	}
	s.Description += " (spaces: "
	for i, sp := range inSpaces {
		if i > 0 {
			s.Description += ", "
		}
		s.Description += sp
	}
	s.Description += ")"
	return s
}

func setEnum(s *jsonschema.Schema, prop string, values []string) {
	if p, ok := s.Properties.Get(prop); ok {
		p.Enum = nil
		for _, v := range values {
			p.Enum = append(p.Enum, v)
		}
	}
}

// SelectInput is the select tool's input: the select effect's fields.
type SelectInput struct {
	Space     string            `json:"space" jsonschema_description:"The space whose item to select (not system)."`
	Selection map[string]string `json:"selection" jsonschema_description:"What to select, e.g. {\"run\": \"<run id>\"} on mission or history, {\"playbook\": \"<id>\"} on library, {\"workflow\": \"<id>\"} on designer, {\"schedule\": \"<id>\"} on schedules."`
}

// JSONSchemaExtend takes the selectable spaces from the route registry.
func (SelectInput) JSONSchemaExtend(s *jsonschema.Schema) {
	var ids []string
	for _, sp := range spaces.Default.Spaces {
		if len(sp.Selection) > 0 {
			ids = append(ids, sp.ID)
		}
	}
	setEnum(s, "space", ids)
}

// ThemeInput is the set_theme tool's input.
type ThemeInput struct {
	Theme string `json:"theme" jsonschema:"enum=light,enum=dark" jsonschema_description:"The cockpit theme."`
}

// PrefillInput is the prefill_form tool's input: the prefill effect's fields.
type PrefillInput struct {
	Form   string         `json:"form" jsonschema_description:"The form to open and fill."`
	Values map[string]any `json:"values" jsonschema_description:"Field values. schedule: name cron playbook input enabled; workflow: name description steps; playbook: name description prompt."`
}

// JSONSchemaExtend takes the forms from the route registry.
func (PrefillInput) JSONSchemaExtend(s *jsonschema.Schema) {
	var ids []string
	for _, f := range spaces.Default.Forms {
		ids = append(ids, f.ID)
	}
	setEnum(s, "form", ids)
}

// NoInput is the input of tools that take none.
type NoInput struct{}

// CurrentView is what get_current_view answers: the freshest view the
// cockpit reported during the turn, else the turn's context snapshot;
// Source says which.
type CurrentView struct {
	Space      string            `json:"space"`
	Route      string            `json:"route"`
	Project    *string           `json:"project,omitempty"`
	Selection  map[string]string `json:"selection,omitempty"`
	Filters    map[string]any    `json:"filters,omitempty"`
	Source     string            `json:"source" jsonschema:"enum=snapshot,enum=report" jsonschema_description:"snapshot: what was shown when the operator asked; report: what the cockpit reported since."`
	ObservedAt *float64          `json:"observedAt,omitempty" jsonschema_description:"When the cockpit observed a reported view (Unix seconds)."`
}

// CockpitTools are the tools that read or move the cockpit itself.
func CockpitTools(reg spaces.Registry) []Spec {
	return []Spec{
		Read("get_current_view", "Current view",
			"What the operator is looking at: space, route, selection and filters. The freshest view the cockpit reported during this turn (source report), else what they looked at when they asked (source snapshot).",
			"cockpit.current_view", func(_ context.Context, env Env, _ NoInput) (CurrentView, error) {
				lv := LiveView{View: env.View, Source: ViewFromSnapshot}
				if env.Live != nil {
					lv = env.Live()
				}
				v := lv.View
				return CurrentView{Space: v.Space, Route: v.Route, Project: v.Project, Selection: v.Selection, Filters: v.Filters,
					Source: lv.Source, ObservedAt: lv.ObservedAt}, nil
			}),
		EffectTool("navigate", "Navigate the cockpit",
			"Ask the operator's cockpit to open a space with route params. The browser applies it and acknowledges; until then it is only requested.",
			ClassNavigate, func(_ Env, in NavigateInput) (protocol.Effect, error) {
				e := protocol.Effect{Kind: protocol.EffectNavigate, Space: in.Space, Params: in.Params}
				if e.Params == nil {
					e.Params = map[string]any{}
				}
				return e, reg.ValidateEffect(e)
			}),
		EffectTool("select", "Select an item",
			"Ask the cockpit to select an item (a run, playbook, workflow, schedule or audit event) in a space. Requested, not done, until the browser acknowledges.",
			ClassNavigate, func(_ Env, in SelectInput) (protocol.Effect, error) {
				e := protocol.Effect{Kind: protocol.EffectSelect, Space: in.Space, Selection: in.Selection}
				return e, reg.ValidateEffect(e)
			}),
		EffectTool("set_theme", "Set the theme", "Ask the cockpit to switch to the light or dark theme.",
			ClassNavigate, func(_ Env, in ThemeInput) (protocol.Effect, error) {
				e := protocol.Effect{Kind: protocol.EffectTheme, Theme: in.Theme}
				return e, reg.ValidateEffect(e)
			}),
		EffectTool("prefill_form", "Prefill a form",
			"Open a create form (schedule, workflow or playbook) in the cockpit with values filled in, for the operator to review and submit. Nothing is created by this tool.",
			ClassDraft, func(_ Env, in PrefillInput) (protocol.Effect, error) {
				e := protocol.Effect{Kind: protocol.EffectPrefill, Form: in.Form, Values: in.Values}
				return e, reg.ValidateEffect(e)
			}),
	}
}
