package coordinator

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	redactpkg "github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/tools"
)

// maxToolResultBytes bounds a tool result in a frame and in the model context.
const maxToolResultBytes = 32 << 10

// unnamedTool stands in a tool_call frame for a call the model made without
// a name; maxToolNameRunes bounds the name a frame shows of an unknown tool.
const (
	unnamedTool      = "unnamed_tool"
	maxToolNameRunes = 64
)

// callResult is what one tool call did to the turn.
type callResult struct {
	proposed bool     // a proposal now waits for a human
	out      *outcome // the turn ends (a frame could not be stored, a limit)
}

// callTool handles one model tool call: a tool_call frame, then the tool's
// run (read), its effect (navigate, draft) or its proposal (mutate, execute,
// admin), then a tool_result frame — except for a proposal, whose result
// comes with the human's decision. Only a failure to persist, or too many
// proposals, ends the turn; tool failures are results the model sees. A
// call refused (a cap) is recorded and answered with why, and never runs.
func (o *owner) callTool(call model.ToolCall, view *protocol.ContextSnapshot, refuse *protocol.Error) callResult {
	c := o.c
	name := call.Name
	switch {
	case name == "":
		name = unnamedTool
	case utf8.RuneCountInString(name) > maxToolNameRunes:
		name = string([]rune(name)[:maxToolNameRunes]) + "…"
	}
	spec, known := c.cfg.Tools.Lookup(call.Name)
	mode := "read" // an unknown tool never runs; it is recorded as a read
	if known {
		mode = spec.Class.Mode()
	}
	// Arguments that are not one JSON object, or too large or deep to
	// read, are the model's mistake: the call is answered with what is
	// wrong, and its frame shows no arguments.
	badArgs := tools.CheckArguments(name, call.Arguments)
	args := call.Arguments
	if badArgs != nil || len(bytes.TrimSpace(args)) == 0 {
		args = jsontext.Value(`{}`)
	}
	// The frame shows the arguments redacted (a token the model pasted,
	// a host path); the tool runs with them as given.
	if perr := o.emit(protocol.ToolCallPayload{CallID: call.ID, Tool: name, Arguments: redact(args), Mode: mode}); perr != nil {
		out := ended(store.TurnFailed, perr)
		return callResult{out: &out}
	}
	// A tool runs only after the turn's frames, its call included, are
	// durable.
	if err := o.settle(); err != nil {
		out := ended(store.TurnFailed, o.frameFailure(err))
		return callResult{out: &out}
	}
	res := protocol.ToolResultPayload{CallID: call.ID}
	var err error
	switch {
	case refuse != nil:
		err = refuse
	case call.Name == "":
		err = protocol.Errorf(protocol.Validation, "the tool call has no tool name; call one of the tools offered by its name").
			With("reason", "no_tool_name")
	case !known:
		err = protocol.Errorf(protocol.Validation, "unknown tool %q; use only the tools offered", name).With("tool", name).
			With("reason", "unknown_tool")
	case badArgs != nil:
		err = badArgs
	default:
		env := tools.Env{}
		if view != nil {
			env.View = *view
			t := o.turn
			env.Live = func() tools.LiveView { return c.liveView(t.ConversationID, t.CreatedAt, *view) }
		}
		var out tools.Outcome
		out, err = spec.Run(o.ctx, env, args)
		switch {
		case err != nil:
		case out.Command != nil:
			if o.proposals >= c.cfg.MaxProposalsPerTurn {
				end := ended(store.TurnFailed, protocol.Errorf(protocol.ModelFailure,
					"the model asked for more than %d changes in one turn; the turn was stopped, ask again one change at a time",
					c.cfg.MaxProposalsPerTurn).With("limit", "proposals_per_turn").With("max", c.cfg.MaxProposalsPerTurn))
				return callResult{out: &end}
			}
			err = o.propose(call.ID, out.Command)
			if err == nil {
				o.proposals++
				return callResult{proposed: true}
			}
		case out.Effect != nil && o.effects >= c.cfg.MaxEffectsPerTurn:
			err = protocol.Errorf(protocol.Validation,
				"this turn asked the cockpit for %d effects already, the most one turn may; this one was not sent: say in words what remains",
				o.effects).With("limit", "effects_per_turn").With("max", c.cfg.MaxEffectsPerTurn)
		case out.Effect != nil:
			res.Result, err = o.emitEffect(*out.Effect)
			if err == nil {
				o.effects++
			}
		default:
			res.Result, err = boundedResult(out.Result)
		}
	}
	if err != nil {
		res.OK, res.Error, res.Result = false, toolError(c, err), nil
	} else {
		res.OK = true
	}
	if perr := o.emit(res); perr != nil {
		out := ended(store.TurnFailed, perr)
		return callResult{out: &out}
	}
	return callResult{}
}

// boundedResult encodes a read tool's answer, redacted and bounded.
func boundedResult(v any) (jsontext.Value, error) {
	b, err := protocol.Marshal(v)
	if err != nil {
		return nil, err
	}
	return clean(b), nil
}

// clean is what a tool or command result may show: redacted and bounded.
func clean(b []byte) jsontext.Value { return boundResult(redact(b)) }

// emitEffect validates an effect against the route registry, then stores
// the pending effect and its ui_command frame in one transaction. The result
// tells the model the effect was requested, not applied.
func (o *owner) emitEffect(e protocol.Effect) (jsontext.Value, error) {
	c, t := o.c, o.turn
	if err := c.cfg.Routes.ValidateEffect(e); err != nil {
		return nil, err
	}
	now := c.now()
	eff, _, err := c.store.EmitEffect(o.ctx, store.EmitEffectParams{ID: uuid.NewString(), ConversationID: t.ConversationID,
		RequestID: t.RequestID, Effect: e, ExpiresAt: now.Add(c.cfg.EffectTTL), Now: now})
	if err == nil {
		o.frames++
	}
	if err != nil {
		c.log.Error("emit effect", "request", t.RequestID, "err", err)
		return nil, protocol.Errorf(protocol.ServiceFailure,
			"the effect could not be stored, so it was not sent to the cockpit; describe the intended action in words instead")
	}
	return protocol.Marshal(map[string]any{
		"effectId": eff.ID,
		"status":   "requested",
		"note":     "The cockpit was asked to apply this; it is applied only when the operator's browser acknowledges it. Say it was requested, not done.",
	})
}

// toolError types a tool failure for the model and the client.
func toolError(c *Coordinator, err error) *protocol.Error {
	pe := protocol.ErrorOf(err)
	if protocol.CodeOf(err) == "" {
		c.log.Error("tool failed", "err", err)
	}
	// A message or detail may quote what the model sent or what the
	// application holds (a name, an input): secrets in it never reach
	// frames either (docs/design.md §16). A copy: the error may be shared.
	out := *pe
	out.Message = redactpkg.Text(pe.Message)
	if len(pe.Details) > 0 {
		out.Details = make(map[string]any, len(pe.Details))
		for k, v := range pe.Details {
			if s, ok := v.(string); ok {
				v = redactpkg.Text(redactpkg.Pointer(s))
			}
			out.Details[k] = v
		}
	}
	return &out
}

// redact removes secrets and absolute host paths from a JSON result: they
// never reach frames (docs/design.md §16).
func redact(b []byte) []byte { return redactpkg.JSON(b) }

// boundResult keeps a result within maxToolResultBytes, saying so when cut.
func boundResult(b []byte) jsontext.Value {
	if len(b) <= maxToolResultBytes {
		return b
	}
	preview := string(b[:maxToolResultBytes/2])
	for !utf8.ValidString(preview) {
		preview = preview[:len(preview)-1]
	}
	out, _ := protocol.Marshal(map[string]any{
		"truncated": true,
		"bytes":     len(b),
		"preview":   preview,
		"note":      fmt.Sprintf("the result was %d bytes; ask for less (filters, a smaller limit)", len(b)),
	})
	return out
}

// notForClient refuses an effect tool in a turn whose client applies no
// effects (it is not in that turn's catalog either): the call is answered
// with why, and the model answers in words instead.
func (c *Coordinator) notForClient(tool string, client protocol.ClientKind) *protocol.Error {
	spec, ok := c.cfg.Tools.Lookup(tool)
	if !ok || !spec.Class.IsEffect() || client.AppliesEffects() {
		return nil
	}
	return protocol.Errorf(protocol.Validation, "%s asks the cockpit to change, and this turn's client (%s) shows no cockpit: answer with the data instead", tool, client).
		With("tool", tool).With("client", string(client))
}
