package policy

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	cedar "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"

	"github.com/studio/operator/internal/protocol"
)

// SchemaFile names the schema in positions and errors.
const SchemaFile = "schema.cedarschema"

//go:embed schema.cedarschema
var schemaText []byte

// SchemaText is the Cedar schema every policy is validated against.
func SchemaText() string { return string(schemaText) }

// File is a policy file: its name (for positions) and its Cedar text.
type File struct {
	Name string
	Text []byte
}

// Options choose the policy set.
type Options struct {
	// SecondApproverFor are the levels (Levels) whose commands need a
	// second principal: --second-approver-for.
	SecondApproverFor []string
	// Files are a team's policies (--policy FILE), added to the built-in
	// ones.
	Files []File
}

// Engine decides with one validated policy set. It is safe for
// concurrent use and never changes once built.
type Engine struct {
	set      *cedar.PolicySet
	policies []Policy // in file order: built-in first
	levels   []string
	files    []File
}

// Policy is one policy of the set.
type Policy struct {
	ID     string `json:"id"`
	Effect string `json:"effect"`           // permit or forbid
	Where  string `json:"where"`            // file:line
	Reason string `json:"reason,omitempty"` // its @reason annotation
	Text   string `json:"text"`
}

// Problem is one reason a policy set is invalid: where, and why.
type Problem struct {
	File    string
	Line    int
	Column  int
	Message string
}

func (p Problem) String() string {
	switch {
	case p.Line > 0 && p.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Column, p.Message)
	case p.Line > 0:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Message)
}

// InvalidError is a policy set that cannot be used: each problem with
// its file, line and reason.
type InvalidError struct{ Problems []Problem }

func (e *InvalidError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "invalid policy: " + strings.Join(lines, "; ")
}

// validator is the schema's validator, built once.
var validator = sync.OnceValues(func() (*validate.Validator, error) {
	var s schema.Schema
	s.SetFilename(SchemaFile)
	if err := s.UnmarshalCedar(schemaText); err != nil {
		return nil, fmt.Errorf("policy schema: %w", err)
	}
	r, err := s.Resolve()
	if err != nil {
		return nil, fmt.Errorf("policy schema: %w", err)
	}
	return validate.New(r), nil
})

// New builds the engine of the built-in policies (with the four-eyes
// levels) and the team's files, each policy validated against the
// schema: an unknown attribute, action or entity type, a type error or a
// syntax error is an *InvalidError naming the file, line and reason.
func New(o Options) (*Engine, error) {
	levels, err := ParseLevels(o.SecondApproverFor)
	if err != nil {
		return nil, fmt.Errorf("second approver levels: %w", err)
	}
	v, err := validator()
	if err != nil {
		return nil, err
	}
	e := &Engine{set: cedar.NewPolicySet(), levels: levels, files: o.Files}
	var problems []Problem
	files := append([]File{{Name: BuiltinFile, Text: []byte(BuiltinText(levels))}}, o.Files...)
	ids := map[string]string{}
	for _, f := range files {
		list, err := cedar.NewPolicyListFromBytes(f.Name, f.Text)
		if err != nil {
			problems = append(problems, parseProblem(f.Name, err))
			continue
		}
		for _, p := range list {
			pos := p.Position()
			where := fmt.Sprintf("%s:%d", f.Name, pos.Line)
			id := string(p.Annotations()["id"])
			if id == "" {
				id = where
			}
			if prev, dup := ids[id]; dup {
				problems = append(problems, Problem{File: f.Name, Line: pos.Line, Message: fmt.Sprintf("policy id %q is already used at %s", id, prev)})
				continue
			}
			ids[id] = where
			if err := v.Policy("", (*xast.Policy)(p.AST())); err != nil {
				for _, m := range splitErrors(err) {
					problems = append(problems, Problem{File: f.Name, Line: pos.Line, Message: fmt.Sprintf("policy %q: %s", id, m)})
				}
				continue
			}
			effect := "permit"
			if p.Effect() == cedar.Forbid {
				effect = "forbid"
			}
			e.set.Add(cedar.PolicyID(id), p)
			e.policies = append(e.policies, Policy{ID: id, Effect: effect, Where: where,
				Reason: string(p.Annotations()["reason"]), Text: string(p.MarshalCedar())})
		}
	}
	if len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	return e, nil
}

// parseProblem is a Cedar syntax error as a Problem: the parser says
// "<input>:LINE:COL" and the reason.
func parseProblem(file string, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "parser error: ")
	msg = strings.TrimPrefix(msg, "parse error at ")
	var line, col int
	if rest, ok := strings.CutPrefix(msg, "<input>:"); ok {
		if n, _ := fmt.Sscanf(rest, "%d:%d", &line, &col); n == 2 {
			if _, after, ok := strings.Cut(rest, " "); ok {
				msg = after
			}
		}
	}
	return Problem{File: file, Line: line, Column: col, Message: msg}
}

// splitErrors flattens joined validation errors into their messages.
func splitErrors(err error) []string {
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

var (
	defaultOnce   sync.Once
	defaultEngine *Engine
)

// Default is the engine of the built-in policies without four-eyes: what
// decides where no engine was configured (tests, tools).
func Default() *Engine {
	defaultOnce.Do(func() {
		e, err := New(Options{})
		if err != nil {
			panic(err) // the built-in set is tested: it always validates
		}
		defaultEngine = e
	})
	return defaultEngine
}

// SecondApproverFor are the engine's four-eyes levels.
func (e *Engine) SecondApproverFor() []string { return slices.Clone(e.levels) }

// Policies lists the engine's policies, built-in first, in file order.
func (e *Engine) Policies() []Policy { return slices.Clone(e.policies) }

// Text is the effective policy set as Cedar: the built-in policies, then
// each team file.
func (e *Engine) Text() string {
	var b strings.Builder
	b.WriteString(BuiltinText(e.levels))
	for _, f := range e.files {
		fmt.Fprintf(&b, "\n// --- %s ---\n", f.Name)
		b.Write(f.Text)
	}
	return b.String()
}

// Decide is the one decision: may principal p do action a on resource r?
//
// It asks the policies for a. A deny says why: the deciding forbid's
// @reason (and the forbids that decided), or "role" with the least role
// that would be allowed when no policy permits. A confirm of one's own
// proposal and a direct command also ask act_alone: where a forbid (four-
// eyes) refuses it, the confirm is denied (second_approver_required) and
// the direct command is allowed with the obligation of a second approver.
func (e *Engine) Decide(p protocol.Principal, a Action, r Resource, c Context) Decision {
	d := e.authorize(p, a, r, c)
	if d.Effect != EffectAllow || !asksAlone(p, a, r) {
		return d
	}
	alone := e.authorize(p, ActAlone, r, c)
	if alone.Effect == EffectAllow {
		return d
	}
	if a == Confirm {
		return Decision{Effect: EffectDeny, Reason: ReasonSecondApprover, Policies: alone.Policies}
	}
	return Decision{Effect: EffectObligation, Reason: ReasonFourEyes, Obligation: SecondApprover, Policies: alone.Policies}
}

// asksAlone reports whether a needs act_alone too: a direct command, and
// a confirm by the proposal's author.
func asksAlone(p protocol.Principal, a Action, r Resource) bool {
	switch a {
	case RunCommand:
		return true
	case Confirm:
		pr, ok := r.(Proposal)
		return ok && pr.Author != "" && pr.Author == p.Name
	}
	return false
}

// authorize is one Cedar evaluation, explained.
func (e *Engine) authorize(p protocol.Principal, a Action, r Resource, c Context) Decision {
	ok, diag := e.evaluate(p, a, r, c)
	if ok {
		return Decision{Effect: EffectAllow, Policies: e.cite(diag.Reasons)}
	}
	d := Decision{Effect: EffectDeny, Reason: ReasonRole, Policies: e.cite(diag.Reasons)}
	if len(d.Policies) > 0 { // forbids decided: the first that says why
		d.Reason = ReasonPolicy
		for _, c := range d.Policies {
			if reason := e.reasonOf(c.ID); reason != "" {
				d.Reason = reason
				break
			}
		}
	}
	if d.Reason == ReasonRole {
		// Would a higher role be allowed? Without one, nothing permits.
		if d.Needed = e.leastRoleAbove(p, a, r, c); d.Needed == "" && len(d.Policies) == 0 {
			d.Reason = ReasonPolicy
		}
	}
	return d
}

// LeastRole is the least role a principal other than r's author would
// need to be allowed a on r ("" when no role would be).
func (e *Engine) LeastRole(a Action, r Resource) protocol.Role {
	return e.leastRoleAbove(protocol.Principal{Name: "\x00another"}, a, r, Context{Door: DoorHTTP})
}

// leastRoleAbove is the least role above p's that would be allowed a on
// r ("" when none).
func (e *Engine) leastRoleAbove(p protocol.Principal, a Action, r Resource, c Context) protocol.Role {
	for _, role := range protocol.Roles {
		if role.Rank() <= p.Role.Rank() {
			continue
		}
		q := p
		q.Role = role
		if ok, _ := e.evaluate(q, a, r, c); ok {
			return role
		}
	}
	return ""
}

func (e *Engine) evaluate(p protocol.Principal, a Action, r Resource, c Context) (bool, cedar.Diagnostic) {
	ents := newEntities(p, r)
	req := cedar.Request{
		Principal: principalUID(p.Name),
		Action:    cedar.NewEntityUID("Action", cedar.String(a)),
		Resource:  ents.resource,
		Context:   cedar.NewRecord(cedar.RecordMap{"door": cedar.String(c.Door)}),
	}
	dec, diag := cedar.Authorize(e.set, ents, req)
	return dec == cedar.Allow, diag
}

// cite lists the policies of reasons in the set's order.
func (e *Engine) cite(reasons []types.DiagnosticReason) []Cited {
	out := make([]Cited, 0, len(reasons))
	for _, p := range e.policies {
		if slices.ContainsFunc(reasons, func(r types.DiagnosticReason) bool { return string(r.PolicyID) == p.ID }) {
			out = append(out, Cited{ID: p.ID, Effect: p.Effect, Where: p.Where})
		}
	}
	return out
}

func (e *Engine) reasonOf(id string) string {
	for _, p := range e.policies {
		if p.ID == id {
			return p.Reason
		}
	}
	return ""
}
