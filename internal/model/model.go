// Package model defines how the operator talks to a language model: a Provider
// streams Events for a compiled Request and honours context cancellation.
// Providers live in sub-packages (offline, script, openai, anthropic); only
// cmd/studio chooses one.
package model

import (
	"context"
	"iter"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
)

// Roles of a conversation message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of the compiled model context.
type Message struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall // assistant messages that called tools
	ToolCallID string     // tool messages: the call they answer
	ToolName   string     // tool messages: the tool that answered
	ToolError  bool       // tool messages: the result is an error
}

// ToolCall is a model's request to run one tool.
type ToolCall struct {
	ID        string
	Name      string
	Arguments jsontext.Value
}

// Tool describes one tool offered to the model.
type Tool struct {
	Name        string
	Description string
	Schema      jsontext.Value // JSON Schema of the input
}

// Request is a compiled context: system prompt, messages oldest first, tools.
type Request struct {
	System   string
	Messages []Message
	Tools    []Tool
	// View is the cockpit context of the current turn; a deterministic model
	// may use it, a remote model sees it inside the system prompt.
	View *protocol.ContextSnapshot
	// Client is the kind of client the answer goes to ("": the cockpit);
	// one that applies no effects is answered with data, not navigation.
	Client protocol.ClientKind
}

// EventKind tells what an Event carries.
type EventKind int

// Event kinds.
const (
	EventText     EventKind = iota + 1 // a text delta
	EventToolCall                      // one complete tool call
	EventUsage                         // the tokens the provider counted for this call
)

// Event is one item of a model stream.
type Event struct {
	Kind     EventKind
	Text     string
	ToolCall ToolCall
	Usage    Usage
}

// Usage is what a provider reports a call cost, when it reports it. A
// provider sends at most one EventUsage per call, usually last; consumers
// that do not count tokens ignore it.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Provider streams a model's answer. Errors are *protocol.Error with code
// model_failure or rate_limited; cancellation of ctx stops the stream at once.
type Provider interface {
	Name() string
	Stream(ctx context.Context, req Request) iter.Seq2[Event, error]
}

// Checker is implemented by providers that can report their own health.
type Checker interface {
	Check(ctx context.Context) error
}

// CurrentInstruction is the content of the last user message.
func (r Request) CurrentInstruction() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == RoleUser {
			return r.Messages[i].Content
		}
	}
	return ""
}

// CurrentToolResults returns the tool messages after the last user message, in
// order: what the model has learnt so far in this turn.
func (r Request) CurrentToolResults() []Message {
	var out []Message
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role == RoleUser {
			break
		}
		if m.Role == RoleTool {
			out = append(out, m)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Complete runs a one-shot completion and returns the concatenated text.
// Tool calls are ignored: a one-shot completion offers no tools.
func Complete(ctx context.Context, p Provider, req Request) (string, error) {
	var b strings.Builder
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			return b.String(), err
		}
		if ev.Kind == EventText {
			b.WriteString(ev.Text)
		}
	}
	return b.String(), ctx.Err()
}

// HistoryToolName is the name a past tool call is sent back to a provider
// under: its own when it is a name providers accept (letters, digits, _ and
// -, at most 64), else "invalid_tool_name" — a model may have called a
// tool by a name no API takes back, and was answered that it does not exist.
func HistoryToolName(name string) string {
	if len(name) == 0 || len(name) > 64 {
		return "invalid_tool_name"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "invalid_tool_name"
		}
	}
	return name
}
