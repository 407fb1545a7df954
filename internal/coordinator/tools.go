package coordinator

import (
	"context"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/tools"
)

// maxToolResultBytes bounds a tool result in a frame and in the model context.
const maxToolResultBytes = 32 << 10

// callTool handles one model tool call: a tool_call frame, the tool's run
// (read), effect (navigate, draft) or refusal, then a tool_result frame. Only
// a failure to persist ends the turn; tool failures are results the model
// sees.
func (c *Coordinator) callTool(ctx context.Context, t store.Turn, call model.ToolCall, view *protocol.ContextSnapshot) (protocol.ToolResultPayload, *protocol.Error) {
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
	callID := call.ID
	if perr := c.emit(ctx, t, protocol.ToolCallPayload{CallID: callID, Tool: call.Name, Arguments: args, Mode: mode}); perr != nil {
		return protocol.ToolResultPayload{}, perr
	}
	res := protocol.ToolResultPayload{CallID: callID}
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
		if err == nil {
			res.Result, err = c.toolOutcome(ctx, t, spec, out)
		}
	}
	if ctx.Err() != nil {
		return res, nil
	}
	if err != nil {
		res.OK, res.Error, res.Result = false, toolError(c, err), nil
	} else {
		res.OK = true
	}
	if perr := c.emit(ctx, t, res); perr != nil {
		return res, perr
	}
	return res, nil
}

// toolOutcome turns what a tool produced into its bounded, redacted result.
func (c *Coordinator) toolOutcome(ctx context.Context, t store.Turn, spec tools.Spec, out tools.Outcome) (jsontext.Value, error) {
	switch {
	case out.Effect != nil:
		return c.emitEffect(ctx, t, *out.Effect)
	case out.Command != nil:
		// Proposals do not exist yet: a change is refused, never executed.
		return nil, protocol.Errorf(protocol.Denied, "%s is a %s tool; changes need a human-confirmed proposal, which this daemon does not offer yet", spec.ID, spec.Class)
	}
	b, err := protocol.Marshal(out.Result)
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

// Secrets and absolute host paths never reach frames (ADR D3).
var (
	secretRE = regexp.MustCompile(`\b(sk-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]{16,}|ghp_[A-Za-z0-9]{20,}|xox[abp]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b`)
	pathRE   = regexp.MustCompile(`(/home/|/Users/|/root/|/var/lib/|/tmp/|[A-Z]:\\\\Users\\\\)[^\s"'<>]*`)
)

// redact replaces secrets and absolute host paths in a JSON result.
func redact(b []byte) []byte {
	b = secretRE.ReplaceAll(b, []byte("[redacted secret]"))
	return pathRE.ReplaceAll(b, []byte("[path]"))
}

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
