package tools

import (
	"context"
	"reflect"

	"github.com/studio/operator/internal/studio"
)

// CommandTools are the mutate, execute and admin tools: one per application
// command type, its input the command itself, its class the command's risk.
// They never execute: their outcome is the decoded command, which the
// coordinator validates against the current state and turns into a
// proposal. The confirmed command is executed by the coordinator through
// the application, not through this registry.
func CommandTools() []Spec {
	var out []Spec
	for _, cs := range studio.Commands() {
		t := reflect.TypeOf(cs.New()).Elem()
		out = append(out, Spec{ID: cs.Type, Title: cs.Title, Description: cs.Description + " Becomes a proposal the operator must confirm.",
			Class: Class(cs.Risk), Operation: cs.Type, InputSchema: schemaOf(t), inputType: t,
			run: func(_ context.Context, _ Env, args []byte) (Outcome, error) {
				if err := refuseSecrets(cs.Type, args); err != nil {
					return Outcome{}, err
				}
				cmd, err := studio.DecodeCommand(cs.Type, args)
				if err != nil {
					return Outcome{}, asValidation(err)
				}
				return Outcome{Command: cmd}, nil
			}})
	}
	return out
}
