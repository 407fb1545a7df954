// Package offline is the default model provider: a deterministic intent
// engine over the tool catalog, with no network and no key. It maps plain
// requests ("show failed runs", "switch to dark mode", "how many runs failed
// today?") onto tool calls, and writes honest answers from the tool results.
// When it does not understand, it says so and lists what it can do.
//
// It is stateless like a remote model: each Stream call sees the instruction
// and the tool results of the current turn so far, and decides the next step.
package offline

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// Provider is the offline intent model.
type Provider struct{}

var _ model.Provider = Provider{}

// New returns the offline model.
func New() Provider { return Provider{} }

// Name implements model.Provider.
func (Provider) Name() string { return "offline" }

// Step is what the model does next: call tools, or answer in words.
type Step struct {
	Calls []model.ToolCall
	Text  string
}

// Stream implements model.Provider.
func (p Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(model.Event{}, err)
			return
		}
		step := Plan(req)
		offered := map[string]bool{}
		for _, t := range req.Tools {
			offered[t.Name] = true
		}
		for _, c := range step.Calls {
			if !offered[c.Name] {
				step = Step{Text: fmt.Sprintf("I would use the %s tool for that, but it is not available here.", c.Name)}
				break
			}
		}
		if step.Text != "" {
			// Stream in a few pieces, as a model would.
			for _, part := range chunks(step.Text, 48) {
				if !yield(model.Event{Kind: model.EventText, Text: part}, nil) {
					return
				}
			}
		}
		for _, c := range step.Calls {
			if !yield(model.Event{Kind: model.EventToolCall, ToolCall: c}, nil) {
				return
			}
		}
	}
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := strings.LastIndexByte(s[:n], ' ')
		if cut <= 0 {
			cut = n
		}
		out = append(out, s[:cut+1])
		s = s[cut+1:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// result is one tool result of the current turn, decoded.
type result struct {
	tool  string
	ok    bool
	value map[string]any
	err   map[string]any
}

// Plan decides the next step for a request. It is exported for tests.
func Plan(req model.Request) Step {
	instr := req.CurrentInstruction()
	var results []result
	calls := map[string]string{} // call id -> tool
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			calls[c.ID] = c.Name
		}
	}
	for _, m := range req.CurrentToolResults() {
		r := result{tool: calls[m.ToolCallID], ok: !m.ToolError}
		var v map[string]any
		_ = protocol.Unmarshal([]byte(m.Content), &v)
		if r.ok {
			r.value = v
		} else if e, ok := v["error"].(map[string]any); ok {
			r.err = e
		}
		results = append(results, r)
	}
	in := parse(instr, req.View, req.Client)
	if in == nil {
		return Step{Text: notUnderstood}
	}
	return in.next(results)
}

// intent is one understood request: given the results so far, the next step.
type intent interface {
	next(results []result) Step
}

const notUnderstood = "I did not understand that, and I would rather say so than guess. " +
	"I can: show runs by status (\"show failed runs\"), open a space (\"open schedules\"), " +
	"answer counts (\"how many runs failed in the last day?\"), report system health, list playbooks, " +
	"workflows, schedules and recent audit events, switch the theme (\"dark mode\"), and draft a schedule " +
	"(\"draft a schedule for audit every weekday at 9\"). Changes such as launching a playbook, cancelling or " +
	"retrying a run, or pausing a schedule become proposals you confirm."

func call(name string, args map[string]any) model.ToolCall {
	b, err := protocol.Marshal(args)
	if err != nil {
		b = []byte(`{}`)
	}
	return model.ToolCall{ID: "", Name: name, Arguments: jsontext.Value(b)}
}

// failed words a tool failure honestly.
func failed(r result) Step {
	code, _ := r.err["code"].(string)
	msg, _ := r.err["message"].(string)
	switch code {
	case "not_found":
		return Step{Text: "I could not find that: " + msg}
	case "denied":
		return Step{Text: "That is not something I may do: " + msg}
	}
	if code == "" {
		return Step{Text: "The tool failed without saying why."}
	}
	return Step{Text: fmt.Sprintf("That did not work (%s): %s", code, msg)}
}

func anyFailed(results []result) (result, bool) {
	i := slices.IndexFunc(results, func(r result) bool { return !r.ok })
	if i < 0 {
		return result{}, false
	}
	return results[i], true
}
