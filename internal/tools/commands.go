package tools

import (
	"context"
	"reflect"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/app"
	"github.com/studio/operator/internal/protocol"
)

// Commander is what command tools need of the application: resolving a
// command's target and executing a confirmed command.
type Commander interface {
	ResolveTarget(ctx context.Context, cmd app.Command) (*protocol.ResourceVersion, error)
	Execute(ctx context.Context, cmd app.Command, opts app.ExecOptions) (app.Result, error)
}

// CommandTools are the mutate, execute and admin tools: one per application
// command type, its input the command itself. They never execute during a
// turn; the coordinator turns their output into a proposal.
func CommandTools() []Spec {
	var out []Spec
	for _, cs := range app.Commands() {
		cs := cs
		t := reflect.TypeOf(cs.New()).Elem()
		out = append(out, Spec{ID: cs.Type, Title: cs.Title, Description: cs.Description + " Becomes a proposal the operator must confirm.",
			Class: Class(cs.Risk), Operation: cs.Type, InputSchema: schemaOf(t), inputType: t,
			run: func(_ context.Context, _ Env, args []byte) (Outcome, error) {
				cmd, err := app.DecodeCommand(cs.Type, args)
				if err != nil {
					return Outcome{}, asValidation(err)
				}
				return Outcome{Command: cmd}, nil
			}})
	}
	return out
}

// Prepared is a command ready to become a proposal.
type Prepared struct {
	Canonical jsontext.Value
	Hash      string
	Summary   string
	Target    *protocol.ResourceVersion
}

// Prepare canonicalises, hashes, summarises a command and resolves its target.
func (r *Registry) Prepare(ctx context.Context, cmd any) (Prepared, error) {
	c, ok := cmd.(app.Command)
	if !ok || r.commander == nil {
		return Prepared{}, protocol.Errorf(protocol.Denied, "commands cannot be proposed here")
	}
	canon, err := app.CanonicalCommand(c)
	if err != nil {
		return Prepared{}, err
	}
	hash, err := protocol.CommandHash(canon)
	if err != nil {
		return Prepared{}, err
	}
	target, err := r.commander.ResolveTarget(ctx, c)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{Canonical: canon, Hash: hash, Summary: c.Summary(), Target: target}, nil
}

// ResolveTarget re-reads the target of a stored (canonical) command.
func (r *Registry) ResolveTarget(ctx context.Context, commandType string, canonical []byte) (*protocol.ResourceVersion, error) {
	if r.commander == nil {
		return nil, protocol.Errorf(protocol.Denied, "commands cannot be executed here")
	}
	c, err := app.DecodeCommand(commandType, canonical)
	if err != nil {
		return nil, err
	}
	return r.commander.ResolveTarget(ctx, c)
}

// Execute runs a confirmed command against the target it was confirmed for,
// on the operator's behalf, and returns its result as JSON.
func (r *Registry) Execute(ctx context.Context, commandType string, canonical []byte, expected *protocol.ResourceVersion) (jsontext.Value, error) {
	if r.commander == nil {
		return nil, protocol.Errorf(protocol.Denied, "commands cannot be executed here")
	}
	c, err := app.DecodeCommand(commandType, canonical)
	if err != nil {
		return nil, err
	}
	res, err := r.commander.Execute(ctx, c, app.ExecOptions{Trigger: app.TriggerOperator, ExpectedTarget: expected})
	if err != nil {
		return nil, err
	}
	return res.JSON()
}
