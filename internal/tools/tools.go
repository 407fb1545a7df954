// Package tools is the operator's tool registry (docs/design.md §7): every tool a
// model may call, by stable id, with its execution class, the application
// operation it maps to, Go input and output types, and JSON Schemas generated
// from those types. Inputs are decoded strictly. Read tools run application
// queries; navigate and draft tools produce UI effects that the coordinator
// emits for the browser to acknowledge; mutate, execute and admin tools
// produce application commands that only ever become proposals.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/invopop/jsonschema"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// Class is a tool's execution class.
type Class string

// Execution classes.
const (
	ClassRead     Class = "read"
	ClassNavigate Class = "navigate"
	ClassDraft    Class = "draft"
	ClassMutate   Class = "mutate"
	ClassExecute  Class = "execute"
	ClassAdmin    Class = "admin"
)

// RunsInTurn reports whether tools of the class execute during the turn;
// the others only ever become proposals.
func (c Class) RunsInTurn() bool { return c == ClassRead || c == ClassNavigate || c == ClassDraft }

// IsEffect reports whether tools of the class ask the cockpit to change:
// they are for clients that apply effects (protocol.ClientKind).
func (c Class) IsEffect() bool { return c == ClassNavigate || c == ClassDraft }

// Mode is the tool_call frame's mode: read for read tools, draft for tools
// that ask the cockpit to change (navigate and draft both emit effects the
// browser must acknowledge).
func (c Class) Mode() string {
	if c == ClassRead {
		return "read"
	}
	return "draft"
}

// Env is what a tool may know of the turn it runs in.
type Env struct {
	// View is the turn's context snapshot: what the operator was looking at.
	View protocol.ContextSnapshot
	// Live, when set, is the freshest view the cockpit reported while the
	// turn runs (or the snapshot when none came after it): what
	// get_current_view answers with.
	Live func() LiveView
}

// Where a LiveView came from.
const (
	ViewFromSnapshot = "snapshot" // the context submitted with the turn
	ViewFromReport   = "report"   // a later report of the cockpit
)

// LiveView is a view and where it came from.
type LiveView struct {
	View       protocol.ContextSnapshot
	Source     string
	ObservedAt *float64 // of a report
}

// Outcome is what running a tool produced: exactly one of Result (read),
// Effect (navigate, draft) or Command (mutate, execute, admin).
type Outcome struct {
	Result  any
	Effect  *protocol.Effect
	Command studio.Command
}

// Spec is one registered tool.
type Spec struct {
	ID           string         `json:"id"`
	Title        string         `json:"title"`
	Description  string         `json:"description"`
	Class        Class          `json:"executionClass"`
	Operation    string         `json:"applicationOperation"` // the application operation or command type
	InputSchema  jsontext.Value `json:"inputSchema"`
	OutputSchema jsontext.Value `json:"outputSchema,omitempty"`

	inputType reflect.Type
	run       func(ctx context.Context, env Env, args []byte) (Outcome, error)
}

// InputType is the Go type of the tool's input.
func (s Spec) InputType() reflect.Type { return s.inputType }

// Run decodes args strictly into the tool's input type, validates it and
// runs the tool. Bad input is a validation error and nothing runs.
func (s Spec) Run(ctx context.Context, env Env, args []byte) (Outcome, error) {
	return s.run(ctx, env, args)
}

// validator is implemented by inputs with rules beyond their types.
type validator interface{ Validate() error }

// decode is the one strict input decoder every tool uses.
func decode[In any](args []byte) (In, error) {
	var in In
	if len(args) == 0 {
		args = []byte(`{}`)
	}
	if err := protocol.Unmarshal(args, &in); err != nil {
		return in, err
	}
	if v, ok := any(&in).(validator); ok {
		if err := v.Validate(); err != nil {
			return in, asValidation(err)
		}
	}
	return in, nil
}

func asValidation(err error) error {
	if protocol.CodeOf(err) != "" {
		return err
	}
	return protocol.Errorf(protocol.Validation, "%v", err)
}

// Read defines a read tool over an application query.
func Read[In, Out any](id, title, description, operation string, fn func(context.Context, Env, In) (Out, error)) Spec {
	s := newSpec[In](id, title, description, ClassRead, operation)
	s.OutputSchema = schemaOf(reflect.TypeFor[Out]())
	s.run = func(ctx context.Context, env Env, args []byte) (Outcome, error) {
		in, err := decode[In](args)
		if err != nil {
			return Outcome{}, err
		}
		out, err := fn(ctx, env, in)
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Result: out}, nil
	}
	return s
}

// EffectTool defines a navigate or draft tool that asks the cockpit to change.
func EffectTool[In any](id, title, description string, class Class, fn func(Env, In) (protocol.Effect, error)) Spec {
	s := newSpec[In](id, title, description, class, "cockpit."+id)
	s.run = func(_ context.Context, env Env, args []byte) (Outcome, error) {
		if err := refuseSecrets(id, args); err != nil {
			return Outcome{}, err
		}
		in, err := decode[In](args)
		if err != nil {
			return Outcome{}, err
		}
		e, err := fn(env, in)
		if err != nil {
			return Outcome{}, asValidation(err)
		}
		return Outcome{Effect: &e}, nil
	}
	return s
}

func newSpec[In any](id, title, description string, class Class, operation string) Spec {
	t := reflect.TypeFor[In]()
	return Spec{ID: id, Title: title, Description: description, Class: class, Operation: operation,
		InputSchema: schemaOf(t), inputType: t}
}

// schemaOf generates a self-contained JSON Schema (no $ref, no $schema, no
// additional properties) for a Go type.
func schemaOf(t reflect.Type) jsontext.Value {
	r := jsonschema.Reflector{Anonymous: true, DoNotReference: true, ExpandedStruct: true}
	s := r.ReflectFromType(t)
	s.Version = ""
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("schema of %v: %v", t, err))
	}
	return b
}

// Registry is the set of tools offered to the model.
type Registry struct {
	specs []Spec
	byID  map[string]int
	// The two catalogs, built once: every turn's model request holds one,
	// and a copy per turn was 6 KiB of live heap for each running turn
	// that the collector marks (docs/benchmarks.md, the tail).
	catalog, catalogNoEffects []model.Tool
}

// NewRegistry builds a registry; duplicate ids are a programming error.
func NewRegistry(specs ...Spec) *Registry {
	r := &Registry{byID: make(map[string]int)}
	for _, s := range specs {
		if _, dup := r.byID[s.ID]; dup {
			panic("duplicate tool id " + s.ID)
		}
		r.byID[s.ID] = len(r.specs)
		r.specs = append(r.specs, s)
	}
	r.catalog, r.catalogNoEffects = make([]model.Tool, 0, len(r.specs)), []model.Tool{}
	for _, s := range r.specs {
		t := model.Tool{Name: s.ID, Description: s.Title + ". " + s.Description, Schema: s.InputSchema}
		r.catalog = append(r.catalog, t)
		if !s.Class.IsEffect() {
			r.catalogNoEffects = append(r.catalogNoEffects, t)
		}
	}
	r.catalog, r.catalogNoEffects = slices.Clip(r.catalog), slices.Clip(r.catalogNoEffects)
	return r
}

// Lookup finds a tool by id.
func (r *Registry) Lookup(id string) (Spec, bool) {
	i, ok := r.byID[id]
	if !ok {
		return Spec{}, false
	}
	return r.specs[i], true
}

// Specs lists every tool in registration order.
func (r *Registry) Specs() []Spec { return slices.Clone(r.specs) }

// Catalog is the tool list offered to a model whose turn's client is
// client: a client that applies no effects is offered no effect tools.
// Every call shares it: read it, never modify it (an append copies).
func (r *Registry) Catalog(client protocol.ClientKind) []model.Tool {
	if client.AppliesEffects() {
		return r.catalog
	}
	return r.catalogNoEffects
}
