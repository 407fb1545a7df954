package coordinator_test

import (
	"context"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
)

// burstProvider answers each of a turn's first rounds rounds with calls
// tool calls of navigate in one answer, then with text (and with text when
// some of its calls were not stored: a cap dropped them).
type burstProvider struct{ calls, rounds int }

func (burstProvider) Name() string { return "burst" }

func (p burstProvider) Stream(_ context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		round := len(req.CurrentToolResults())
		if round >= p.calls*p.rounds || round > 0 && round%p.calls != 0 {
			yield(model.Event{Kind: model.EventText, Text: "done"}, nil)
			return
		}
		for i := range p.calls {
			call := model.ToolCall{ID: fmt.Sprintf("call_%d_%d", round, i), Name: "navigate", Arguments: jsontext.Value(`{"space":"mission","params":{"view":"fleet"}}`)}
			if !yield(model.Event{Kind: model.EventToolCall, ToolCall: call}, nil) {
				return
			}
		}
	}
}

// count counts frames of a type, and tool results refused for a limit.
func count(frames []protocol.Frame, typ protocol.FrameType) int {
	n := 0
	for _, f := range frames {
		if f.Type == typ {
			n++
		}
	}
	return n
}

func limited(frames []protocol.Frame, limit string) int {
	n := 0
	for _, f := range frames {
		if r, ok := f.Payload.(protocol.ToolResultPayload); ok && !r.OK && r.Error != nil && r.Error.Details["limit"] == limit {
			n++
		}
	}
	return n
}

// TestOneAnswerCannotFloodTheCockpit: an answer of 1 000 tool calls runs
// the first MaxToolCallsPerAnswer, answers one more with why, and stores
// nothing of the rest; the turn goes on.
func TestOneAnswerCannotFloodTheCockpit(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{provider: burstProvider{calls: 1000, rounds: 1}, tweak: func(c *coordinator.Config) {
		c.MaxToolCallsPerAnswer, c.MaxEffectsPerTurn = 8, 100
	}})
	conv := e.conversation()
	acc := e.submit(conv, "flood")
	frames := ofRequest(e.waitDone(conv, acc.RequestID), acc.RequestID)
	if k := kinds(frames); k[len(k)-1] != "done:completed" {
		t.Fatalf("flooded turn: %v", k)
	}
	if n := count(frames, protocol.FrameUICommand); n != 8 {
		t.Fatalf("%d effects from one answer, want 8", n)
	}
	if n := count(frames, protocol.FrameToolCall); n != 9 || limited(frames, "tool_calls_per_answer") != 1 {
		t.Fatalf("%d tool calls stored, %d refused for the cap; want 9 and 1: %v", n, limited(frames, "tool_calls_per_answer"), kinds(frames))
	}
}

// TestEffectsPerTurnAreCapped: across rounds, a turn emits at most
// MaxEffectsPerTurn effects; the calls past it are answered with why.
func TestEffectsPerTurnAreCapped(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{provider: burstProvider{calls: 4, rounds: 3}, tweak: func(c *coordinator.Config) {
		c.MaxToolCallsPerAnswer, c.MaxEffectsPerTurn = 8, 6
	}})
	conv := e.conversation()
	acc := e.submit(conv, "many")
	frames := ofRequest(e.waitDone(conv, acc.RequestID), acc.RequestID)
	if k := kinds(frames); k[len(k)-1] != "done:completed" {
		t.Fatalf("turn: %v", k)
	}
	if n := count(frames, protocol.FrameUICommand); n != 6 {
		t.Fatalf("%d effects in one turn, want 6", n)
	}
	if n := limited(frames, "effects_per_turn"); n != 6 {
		t.Fatalf("%d calls refused for the turn's cap, want 6", n)
	}
}

// TestModelBudgetEndsASilentModel: a provider that never answers holds a
// worker no longer than the turn's model budget, whatever its per-attempt
// deadlines and retries would allow.
func TestModelBudgetEndsASilentModel(t *testing.T) {
	t.Parallel()
	silent := script.Script{Turns: []script.Turn{{Steps: []script.Step{{SleepMs: ptr(int64(600_000))}}}}}
	e := newEngine(t, engineOpts{script: &silent, tweak: func(c *coordinator.Config) {
		c.FirstEventTimeout, c.IdleTimeout, c.AttemptTimeout = time.Hour, time.Hour, time.Hour
		c.ModelBudget = 100 * time.Millisecond
	}})
	conv := e.conversation()
	acc := e.submit(conv, "anything")
	frames := ofRequest(e.waitDone(conv, acc.RequestID), acc.RequestID)
	end, ok := frames[len(frames)-2].Payload.(protocol.ErrorPayload)
	if !ok || end.Error.Code != protocol.ModelFailure || end.Error.Details["limit"] != "model_time_per_turn" {
		t.Fatalf("a silent model's turn: %v", kinds(frames))
	}
}
