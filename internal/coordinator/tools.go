package coordinator

import (
	"context"
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

// callTool handles one model tool call: a tool_call frame, then the tool's
// run (read), its effect (navigate, draft) or its proposal (mutate, execute,
// admin), then a tool_result frame — except for a proposal, whose result
// comes with the human's decision (pending is true then). Only a failure to
// persist ends the turn; tool failures are results the model sees.
func (c *Coordinator) callTool(ctx context.Context, t store.Turn, call model.ToolCall, view *protocol.ContextSnapshot) (pending bool, perr *protocol.Error) {
	spec, known := c.tools.Lookup(call.Name)
	mode := "read" // an unknown tool never runs; it is recorded as a read
	if known {
		mode = spec.Class.Mode()
	}
	args := call.Arguments
	argsOK := args.IsValid() && args.Kind() == '{'
	if !argsOK {
		args = jsontext.Value(`{}`)
	}
	if perr := c.emit(ctx, t, protocol.ToolCallPayload{CallID: call.ID, Tool: call.Name, Arguments: args, Mode: mode}); perr != nil {
		return false, perr
	}
	res := protocol.ToolResultPayload{CallID: call.ID}
	var err error
	switch {
	case !known:
		err = protocol.Errorf(protocol.Validation, "unknown tool %q; use only the tools offered", call.Name).With("tool", call.Name)
	case !argsOK:
		err = protocol.Errorf(protocol.Validation, "tool arguments must be a JSON object").With("tool", call.Name)
	default:
		env := tools.Env{}
		if view != nil {
			env.View = *view
		}
		var out tools.Outcome
		out, err = spec.Run(ctx, env, call.Arguments)
		switch {
		case err != nil:
		case out.Command != nil:
			err = c.propose(ctx, t, spec, call.ID, out.Command)
			if err == nil {
				return true, nil
			}
		case out.Effect != nil:
			res.Result, err = c.emitEffect(ctx, t, *out.Effect)
		default:
			res.Result, err = boundedResult(out.Result)
		}
	}
	if ctx.Err() != nil {
		return false, nil
	}
	if err != nil {
		res.OK, res.Error, res.Result = false, toolError(c, err), nil
	} else {
		res.OK = true
	}
	return false, c.emit(ctx, t, res)
}

// boundedResult encodes a read tool's answer, redacted and bounded.
func boundedResult(v any) (jsontext.Value, error) {
	b, err := protocol.Marshal(v)
	if err != nil {
		return nil, err
	}
	return boundResult(redact(b)), nil
}

// emitEffect validates an effect against the route registry, then stores
// the pending effect and its ui_command frame in one transaction. The result
// tells the model the effect was requested, not applied.
func (c *Coordinator) emitEffect(ctx context.Context, t store.Turn, e protocol.Effect) (jsontext.Value, error) {
	if err := c.routes.ValidateEffect(e); err != nil {
		return nil, err
	}
	now := c.now()
	eff, _, err := c.store.EmitEffect(ctx, store.EmitEffectParams{ID: uuid.NewString(), ConversationID: t.ConversationID,
		RequestID: t.RequestID, Effect: e, ExpiresAt: now.Add(c.cfg.EffectTTL), Now: now})
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
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
	return pe
}

// redact removes secrets and absolute host paths from a JSON result: they
// never reach frames (ADR D3).
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
