// Package spaces is the cockpit's route registry (docs/design.md §8): the six
// spaces, their paths, the params each accepts and the effects each allows.
// It is the only source of destinations: the server validates effects with
// it, the dock fetches it as JSON and validates again, and the tools' schemas
// take their enums from it.
package spaces

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// Param types.
const (
	TypeString = "string"
	TypeEnum   = "enum"
	TypeInt    = "integer"
	TypeBool   = "boolean"
	TypeList   = "list" // of strings
	TypeID     = "id"   // a resource's id or name: IDPattern
)

// IDPattern is the form of every id a param or a selection names (a run's
// UUID, a playbook's name): the application's reference form
// (studio.CheckRef), so that no path, URL or query string can pass as one.
const IDPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`

var idPattern = regexp.MustCompile(IDPattern)

// MaxStringParam bounds a string param or a selection value, in bytes.
const MaxStringParam = 200

// Param is one query parameter of a space's route.
type Param struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Values      []string `json:"values,omitempty"`  // enum: the allowed values
	Pattern     string   `json:"pattern,omitempty"` // id: the form of the value (IDPattern)
	Description string   `json:"description"`
}

// idParam is a param naming a resource by id or name.
func idParam(name, description string) Param {
	return Param{Name: name, Type: TypeID, Pattern: IDPattern, Description: description}
}

// Space is one of the six spaces.
type Space struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Path     string `json:"path"`
	Shortcut string `json:"shortcut"` // the key after "g" that opens the space (g then m: Mission)
	// Description tells the model what the space is for; Subtitle tells a
	// person, under the page's title. They are kept apart because they are
	// written for different readers.
	Description string   `json:"description"`
	Subtitle    string   `json:"subtitle"`
	Params      []Param  `json:"params"`
	Effects     []string `json:"effects"`             // effect kinds this space accepts
	Selection   []string `json:"selection,omitempty"` // keys a select effect may set
	Form        string   `json:"form,omitempty"`      // the form a prefill effect opens here
}

// Form is a prefill target and the fields it accepts.
type Form struct {
	ID     string      `json:"id"`
	Space  string      `json:"space"`
	Fields []FormField `json:"fields"`
}

// FormField is one field of a form.
type FormField struct {
	Name        string `json:"name"`
	Type        string `json:"type"` // string | boolean | object
	MaxLength   int    `json:"maxLength,omitempty"`
	Description string `json:"description"`
}

// Registry is the route registry as served at GET /api/operator/routes.
type Registry struct {
	Version int      `json:"version"`
	Spaces  []Space  `json:"spaces"`
	Forms   []Form   `json:"forms"`
	Themes  []string `json:"themes"`
}

var runStatuses = []string{"queued", "running", "succeeded", "failed", "cancelled"}

// TimeRanges are the time ranges the fleet and the audit trail offer: the
// last hour, day, week or 30 days (absent: all time).
var TimeRanges = []string{"1h", "24h", "7d", "30d"}

// Default is the registry of this build.
var Default = Registry{
	Version: 1,
	Themes:  protocol.Themes,
	Spaces: []Space{
		{ID: "mission", Title: "Mission", Path: "/", Shortcut: "m",
			Description: "Overview of run activity; view=fleet shows the runs table.",
			Subtitle:    "What ran, what failed and what is running now.",
			Params: []Param{
				{Name: "view", Type: TypeEnum, Values: []string{"overview", "fleet"}, Description: "overview or the fleet of runs"},
				{Name: "status", Type: TypeEnum, Values: runStatuses, Description: "fleet: show runs with this status"},
				{Name: "trigger", Type: TypeEnum, Values: []string{"manual", "schedule", "operator"}, Description: "fleet: show runs started this way"},
				idParam("playbook", "fleet: show runs of this playbook (name)"),
				{Name: "q", Type: TypeString, Description: "fleet: search by playbook name, input or run id prefix (on the server)"},
				{Name: "range", Type: TypeEnum, Values: TimeRanges, Description: "fleet: runs created in the last hour, 24 hours, 7 days or 30 days (absent: all)"},
				idParam("run", "the selected run id"),
			},
			Effects: []string{protocol.EffectNavigate, protocol.EffectSelect, protocol.EffectTheme}, Selection: []string{"run"}},
		{ID: "designer", Title: "Designer", Path: "/designer", Shortcut: "d",
			Description: "Workflows: ordered steps of playbooks, with an editor.",
			Subtitle:    "Chain playbooks into ordered workflows.",
			Params: []Param{
				{Name: "q", Type: TypeString, Description: "text search"},
				idParam("workflow", "the selected workflow id"),
			},
			Effects: []string{protocol.EffectNavigate, protocol.EffectSelect, protocol.EffectPrefill, protocol.EffectTheme}, Selection: []string{"workflow"}, Form: "workflow"},
		{ID: "library", Title: "Library", Path: "/library", Shortcut: "l",
			Description: "Playbooks: search, detail, create and edit.",
			Subtitle:    "The playbooks you can launch, edit or schedule.",
			Params: []Param{
				{Name: "q", Type: TypeString, Description: "text search"},
				idParam("playbook", "the selected playbook id"),
			},
			Effects: []string{protocol.EffectNavigate, protocol.EffectSelect, protocol.EffectPrefill, protocol.EffectTheme}, Selection: []string{"playbook"}, Form: "playbook"},
		{ID: "history", Title: "History", Path: "/history", Shortcut: "h",
			Description: "Finished runs and the audit trail.",
			Subtitle:    "Finished runs and every recorded change.",
			Params: []Param{
				{Name: "tab", Type: TypeEnum, Values: []string{"runs", "audit"}, Description: "finished runs or the audit trail"},
				{Name: "status", Type: TypeEnum, Values: []string{"succeeded", "failed", "cancelled"}, Description: "runs: show this outcome"},
				{Name: "q", Type: TypeString, Description: "runs: text search"},
				{Name: "action", Type: TypeEnum, Values: studio.CommandTypes(), Description: "audit: the command type, for example launch_playbook or delete_schedule"},
				{Name: "actor", Type: TypeString, Description: "audit: who acted: a person's principal name, or studio_cockpit, studio_cli, studio_operator, studio_scheduler or studio_system"},
				idParam("target", "audit: the id of the resource or proposal acted on"),
				{Name: "range", Type: TypeEnum, Values: TimeRanges, Description: "audit: events in the last hour, 24 hours, 7 days or 30 days (absent: all)"},
				idParam("run", "the selected run id"),
				idParam("event", "the selected audit event id"),
			},
			Effects: []string{protocol.EffectNavigate, protocol.EffectSelect, protocol.EffectTheme}, Selection: []string{"run", "event"}},
		{ID: "schedules", Title: "Schedules", Path: "/schedules", Shortcut: "s",
			Description: "Cron schedules that launch playbooks.",
			Subtitle:    "Playbooks that run on a timetable (cron in UTC).",
			Params: []Param{
				{Name: "enabled", Type: TypeBool, Description: "show only enabled (true) or disabled (false) schedules"},
				{Name: "q", Type: TypeString, Description: "text search"},
				idParam("schedule", "the selected schedule id"),
			},
			Effects: []string{protocol.EffectNavigate, protocol.EffectSelect, protocol.EffectPrefill, protocol.EffectTheme}, Selection: []string{"schedule"}, Form: "schedule"},
		{ID: "system", Title: "System", Path: "/system", Shortcut: "y",
			Description: "Health, maintenance, appearance and, for admins, the team (principals, tokens, webhooks).",
			Subtitle:    "Health of the daemon, database upkeep and appearance.",
			Params: []Param{
				{Name: "tab", Type: TypeEnum, Values: []string{"health", "maintenance", "appearance", "team"}, Description: "which panel (team: principals, tokens and webhooks, for admins)"},
			},
			Effects: []string{protocol.EffectNavigate, protocol.EffectTheme}},
	},
	Forms: []Form{
		{ID: "schedule", Space: "schedules", Fields: []FormField{
			{Name: "name", Type: "string", MaxLength: 64, Description: "schedule name"},
			{Name: "cron", Type: "string", MaxLength: 100, Description: "5-field cron expression, e.g. 0 9 * * 1-5"},
			{Name: "playbook", Type: "string", MaxLength: 64, Description: "playbook name"},
			{Name: "input", Type: "string", MaxLength: 4000, Description: "input passed to the playbook"},
			{Name: "enabled", Type: "boolean", Description: "whether the schedule starts enabled"},
		}},
		{ID: "workflow", Space: "designer", Fields: []FormField{
			{Name: "name", Type: "string", MaxLength: 64, Description: "workflow name"},
			{Name: "description", Type: "string", MaxLength: 2000, Description: "what the workflow is for"},
			{Name: "steps", Type: "string", MaxLength: 2000, Description: "playbook names in order, comma separated"},
		}},
		{ID: "playbook", Space: "library", Fields: []FormField{
			{Name: "name", Type: "string", MaxLength: 64, Description: "playbook name: lowercase letters, digits, - _ ."},
			{Name: "description", Type: "string", MaxLength: 2000, Description: "what the playbook does"},
			{Name: "prompt", Type: "string", MaxLength: 16000, Description: "the prompt the model runs"},
		}},
	},
}

// SpaceIDs lists the six space ids in rail order.
func (r Registry) SpaceIDs() []string {
	ids := make([]string, len(r.Spaces))
	for i, s := range r.Spaces {
		ids[i] = s.ID
	}
	return ids
}

// Space returns a space by id.
func (r Registry) Space(id string) (Space, bool) {
	for _, s := range r.Spaces {
		if s.ID == id {
			return s, true
		}
	}
	return Space{}, false
}

// Form returns a form by id.
func (r Registry) Form(id string) (Form, bool) {
	for _, f := range r.Forms {
		if f.ID == id {
			return f, true
		}
	}
	return Form{}, false
}

func (s Space) param(name string) (Param, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

func invalid(format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.Validation, format, args...)
}

// ValidateEffect checks an effect against the registry: the space accepts the
// effect kind, every param exists with the right type and allowed value,
// selection keys are the space's, prefill values are the form's fields.
func (r Registry) ValidateEffect(e protocol.Effect) error {
	if err := e.Validate(); err != nil {
		return err
	}
	switch e.Kind {
	case protocol.EffectNavigate:
		sp, ok := r.Space(e.Space)
		if !ok {
			return invalid("unknown space %q", e.Space)
		}
		for name, v := range e.Params {
			p, ok := sp.param(name)
			if !ok {
				return invalid("space %s has no param %q", sp.ID, name).With("param", name)
			}
			if err := p.check(v); err != nil {
				return err
			}
		}
	case protocol.EffectSelect:
		sp, ok := r.Space(e.Space)
		if !ok || !slices.Contains(sp.Effects, protocol.EffectSelect) {
			return invalid("select is not allowed on space %q", e.Space)
		}
		for k, v := range e.Selection {
			if !slices.Contains(sp.Selection, k) {
				return invalid("space %s cannot select %q; it selects %v", sp.ID, k, sp.Selection).With("param", k)
			}
			if !idPattern.MatchString(v) {
				return invalid("selection %s must be an id or a name (letters, digits, . _ -, at most 64), not %q", k, trimQuote(v)).With("param", k)
			}
		}
	case protocol.EffectPrefill:
		f, ok := r.Form(e.Form)
		if !ok {
			return invalid("unknown form %q", e.Form)
		}
		return f.ValidateValues(e.Values)
	case protocol.EffectTheme:
	}
	return nil
}

// ValidateValues checks prefill values against the form's fields.
func (f Form) ValidateValues(values map[string]any) error {
	if len(values) == 0 {
		return invalid("prefill of form %s needs at least one value", f.ID)
	}
	for name, v := range values {
		i := slices.IndexFunc(f.Fields, func(ff FormField) bool { return ff.Name == name })
		if i < 0 {
			return invalid("form %s has no field %q", f.ID, name).With("field", name)
		}
		ff := f.Fields[i]
		switch ff.Type {
		case "string":
			s, ok := v.(string)
			if !ok {
				return invalid("form field %s must be a string", name).With("field", name)
			}
			if ff.MaxLength > 0 && len([]rune(s)) > ff.MaxLength {
				return invalid("form field %s is longer than %d characters", name, ff.MaxLength).With("field", name)
			}
		case "boolean":
			if _, ok := v.(bool); !ok {
				return invalid("form field %s must be true or false", name).With("field", name)
			}
		}
	}
	return nil
}

func (p Param) check(v any) error {
	bad := func() error {
		if p.Type == TypeEnum {
			return invalid("param %s must be one of %v", p.Name, p.Values).With("param", p.Name)
		}
		return invalid("param %s must be a %s", p.Name, p.Type).With("param", p.Name)
	}
	switch p.Type {
	case TypeString:
		s, ok := v.(string)
		if !ok || s == "" || len(s) > MaxStringParam {
			return invalid("param %s must be a non-empty string of at most %d bytes", p.Name, MaxStringParam).With("param", p.Name)
		}
	case TypeID:
		s, ok := v.(string)
		if !ok || !idPattern.MatchString(s) {
			return invalid("param %s must be an id or a name (letters, digits, . _ -, at most 64), not %q", p.Name, trimQuote(fmt.Sprint(v))).With("param", p.Name)
		}
	case TypeEnum:
		s, ok := v.(string)
		if !ok || !slices.Contains(p.Values, s) {
			return bad()
		}
	case TypeBool:
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case TypeInt:
		switch x := v.(type) {
		case int, int64:
		case float64:
			if x != float64(int64(x)) {
				return bad()
			}
		default:
			return bad()
		}
	case TypeList:
		switch v.(type) {
		case []string, []any:
		default:
			return bad()
		}
	}
	return nil
}

// trimQuote bounds a refused value quoted back to the model.
func trimQuote(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

// paramString is the URL form of a param value.
func paramString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatInt(int64(x), 10)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case []string:
		return strings.Join(x, ",")
	case []any:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = fmt.Sprint(s)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

// RouteOf is the canonical client route a navigate effect leads to: the
// space's path and its params, sorted.
func (r Registry) RouteOf(e protocol.Effect) string {
	sp, _ := r.Space(e.Space)
	q := url.Values{}
	for k, v := range e.Params {
		q.Set(k, paramString(v))
	}
	if len(q) == 0 {
		return sp.Path
	}
	return sp.Path + "?" + q.Encode()
}

// MatchesRoute reports whether a client route is where an applied effect
// must have left the cockpit: navigate on exactly its space and params;
// select on its space with the selection set; prefill on the form's space;
// theme anywhere the registry knows.
func (r Registry) MatchesRoute(e protocol.Effect, clientRoute string) error {
	u, err := url.Parse(clientRoute)
	if err != nil || u.Path == "" || u.Host != "" || u.Scheme != "" {
		return invalid("clientRoute %q is not a cockpit route", clientRoute).With("field", "clientRoute")
	}
	sp, ok := r.spaceAt(u.Path)
	if !ok {
		return invalid("clientRoute %q is not a route of the registry", clientRoute).With("field", "clientRoute")
	}
	q := u.Query()
	mismatch := func() error {
		return invalid("clientRoute %q does not match the effect", clientRoute).With("field", "clientRoute").With("expectedSpace", sp.ID)
	}
	switch e.Kind {
	case protocol.EffectNavigate:
		if sp.ID != e.Space || len(q) != len(e.Params) {
			return mismatch()
		}
		for k, v := range e.Params {
			if q.Get(k) != paramString(v) {
				return mismatch()
			}
		}
	case protocol.EffectSelect:
		if sp.ID != e.Space {
			return mismatch()
		}
		for k, v := range e.Selection {
			if q.Get(k) != v {
				return mismatch()
			}
		}
	case protocol.EffectPrefill:
		f, _ := r.Form(e.Form)
		if sp.ID != f.Space {
			return mismatch()
		}
	}
	return nil
}

func (r Registry) spaceAt(path string) (Space, bool) {
	for _, s := range r.Spaces {
		if s.Path == path {
			return s, true
		}
	}
	return Space{}, false
}

// ParamNames lists every param name of every space, sorted (for schemas).
func (r Registry) ParamNames() []string {
	set := map[string]bool{}
	for _, s := range r.Spaces {
		for _, p := range s.Params {
			set[p.Name] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
