// Package script is a model provider that replays a JSON script of steps:
// text, tool calls, sleeps and failures. It is for tests, demos and
// benchmarks; it is deterministic and needs no network.
package script

import (
	"context"
	"fmt"
	"iter"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// Script is the file format: the first turn whose Match occurs in the
// instruction (or that has no Match) plays.
type Script struct {
	Turns []Turn `json:"turns"`
}

// Turn is one scripted answer.
type Turn struct {
	Match string `json:"match,omitempty"`
	Steps []Step `json:"steps"`
	// Paced keeps the turn's sleeps to a schedule from its start: a sleep
	// ends when the sleeps so far add up, so time lost elsewhere (a timer
	// that fires late on a busy machine, a slow consumer) shortens the next
	// sleep instead of slowing the turn. A benchmark offering N tokens/s
	// then offers N, not what the timers allow.
	Paced bool `json:"paced,omitempty"`
}

// Step is exactly one of: text, sleepMs, fail, or tool (with arguments).
type Step struct {
	Text      *string         `json:"text,omitempty"`
	SleepMs   *int64          `json:"sleepMs,omitempty"`
	Fail      *protocol.Error `json:"fail,omitempty"`
	Tool      *string         `json:"tool,omitempty"`
	Arguments jsontext.Value  `json:"arguments,omitempty"`
}

// EmittedAt in a text step is replaced, as the step is played, by the time
// in Unix nanoseconds: `studio bench` times each token to the screen.
const EmittedAt = "{{emittedAt}}"

// Greeting is the built-in script of the default model until the offline
// intent model exists.
var Greeting = Script{Turns: []Turn{{Steps: []Step{
	{Text: ptr("Hello from the Studio operator. ")},
	{Text: ptr("This daemon runs the built-in script model, which only greets; ")},
	{Text: ptr("configure a model with --model to get real answers.")},
}}}}

func ptr[T any](v T) *T { return &v }

// Provider plays a Script.
type Provider struct {
	script Script
	sleep  func(ctx context.Context, d time.Duration) error
	now    func() time.Time
}

var _ model.Provider = (*Provider)(nil)

// New returns a provider for s after validating every step.
func New(s Script) (*Provider, error) {
	for i, t := range s.Turns {
		for j, st := range t.Steps {
			n := 0
			for _, set := range []bool{st.Text != nil, st.SleepMs != nil, st.Fail != nil, st.Tool != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				return nil, fmt.Errorf("script turn %d step %d: exactly one of text, sleepMs, fail, tool is required", i, j)
			}
			if st.Arguments != nil && st.Tool == nil {
				return nil, fmt.Errorf("script turn %d step %d: arguments without tool", i, j)
			}
			if st.Fail != nil && !st.Fail.Code.Valid() {
				return nil, fmt.Errorf("script turn %d step %d: unknown error code %q", i, j, st.Fail.Code)
			}
		}
	}
	return &Provider{script: s, sleep: sleepCtx, now: time.Now}, nil
}

// Load reads a script file.
func Load(path string) (*Provider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	var s Script
	if err := protocol.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parse script %s: %w", path, err)
	}
	return New(s)
}

// Name implements model.Provider.
func (p *Provider) Name() string { return "script" }

// Stream plays the matching turn. It is stateless: after the k-th tool call
// of the turn has been answered, it resumes with the step after that call.
func (p *Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		turn, ok := p.match(req.CurrentInstruction())
		if !ok {
			yield(model.Event{}, protocol.Errorf(protocol.ModelFailure, "the script has no turn for this instruction"))
			return
		}
		start := 0
		if k := len(req.CurrentToolResults()); k > 0 {
			start = -1
			seen := 0
			for i, st := range turn.Steps {
				if st.Tool != nil {
					if seen++; seen == k {
						start = i + 1
						break
					}
				}
			}
			if start < 0 {
				return // every scripted tool call is answered: nothing more to say
			}
		}
		due := p.now() // a paced turn's schedule: when its sleeps so far end
		for i := start; i < len(turn.Steps); i++ {
			st := turn.Steps[i]
			if err := ctx.Err(); err != nil {
				yield(model.Event{}, err)
				return
			}
			switch {
			case st.Text != nil:
				text := *st.Text
				if strings.Contains(text, EmittedAt) { // a benchmark's timestamp of the token
					text = strings.ReplaceAll(text, EmittedAt, strconv.FormatInt(time.Now().UnixNano(), 10))
				}
				if !yield(model.Event{Kind: model.EventText, Text: text}, nil) {
					return
				}
			case st.SleepMs != nil:
				d := time.Duration(*st.SleepMs) * time.Millisecond
				if turn.Paced {
					due = due.Add(d)
					if d = due.Sub(p.now()); d <= 0 {
						continue // behind the schedule: no sleep
					}
				}
				if err := p.sleep(ctx, d); err != nil {
					yield(model.Event{}, err)
					return
				}
			case st.Fail != nil:
				e := *st.Fail
				yield(model.Event{}, &e)
				return
			case st.Tool != nil:
				args := st.Arguments
				if args == nil {
					args = jsontext.Value(`{}`)
				}
				call := model.ToolCall{ID: fmt.Sprintf("call_%d", i+1), Name: *st.Tool, Arguments: args}
				yield(model.Event{Kind: model.EventToolCall, ToolCall: call}, nil)
				return // the model waits for the tool result
			}
		}
	}
}

func (p *Provider) match(instruction string) (Turn, bool) {
	for _, t := range p.script.Turns {
		if t.Match == "" || strings.Contains(instruction, t.Match) {
			return t, true
		}
	}
	return Turn{}, false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
