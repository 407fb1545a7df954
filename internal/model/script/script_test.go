package script

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

func play(t *testing.T, p *Provider, ctx context.Context, msgs ...model.Message) (text string, calls []string, err error) {
	t.Helper()
	for ev, e := range p.Stream(ctx, model.Request{Messages: msgs}) {
		if e != nil {
			return text, calls, e
		}
		switch ev.Kind {
		case model.EventText:
			text += ev.Text
		case model.EventToolCall:
			calls = append(calls, ev.ToolCall.Name+" "+string(ev.ToolCall.Arguments))
		}
	}
	return text, calls, nil
}

func TestScriptPlaysMatchingTurnAndResumesAfterTools(t *testing.T) {
	t.Parallel()
	p, err := New(Script{Turns: []Turn{
		{Match: "tools", Steps: []Step{{Text: ptr("a")}, {Tool: ptr("list_runs"), Arguments: []byte(`{"limit":1}`)}, {Text: ptr("b")}, {Tool: ptr("run_stats")}, {Text: ptr("c")}}},
		{Steps: []Step{{Text: ptr("default")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	user := model.Message{Role: model.RoleUser, Content: "use tools please"}
	text, calls, err := play(t, p, ctx, user)
	if err != nil || text != "a" || len(calls) != 1 || calls[0] != `list_runs {"limit":1}` {
		t.Fatalf("round 1: %q %v %v", text, calls, err)
	}
	answered := func(n int) []model.Message {
		msgs := []model.Message{user}
		for i := range n {
			msgs = append(msgs, model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: string(rune('a' + i))}}},
				model.Message{Role: model.RoleTool, ToolCallID: string(rune('a' + i)), Content: "{}"})
		}
		return msgs
	}
	if text, calls, _ = play(t, p, ctx, answered(1)...); text != "b" || len(calls) != 1 || calls[0] != "run_stats {}" {
		t.Fatalf("round 2: %q %v", text, calls)
	}
	if text, calls, _ = play(t, p, ctx, answered(2)...); text != "c" || len(calls) != 0 {
		t.Fatalf("round 3: %q %v", text, calls)
	}
	if text, _, _ = play(t, p, ctx, model.Message{Role: model.RoleUser, Content: "hello"}); text != "default" {
		t.Fatalf("default turn: %q", text)
	}
}

func TestScriptFailAndCancelledSleep(t *testing.T) {
	t.Parallel()
	p, err := New(Script{Turns: []Turn{
		{Match: "fail", Steps: []Step{{Text: ptr("x")}, {Fail: &protocol.Error{Code: protocol.RateLimited, Message: "slow", Retryable: true}}}},
		{Steps: []Step{{SleepMs: ptr(int64(600_000))}, {Text: ptr("never")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = play(t, p, context.Background(), model.Message{Role: model.RoleUser, Content: "fail now"})
	if !protocol.IsCode(err, protocol.RateLimited) {
		t.Fatalf("fail step: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	text, _, err := play(t, p, ctx, model.Message{Role: model.RoleUser, Content: "sleep"})
	if !errors.Is(err, context.DeadlineExceeded) || text != "" {
		t.Fatalf("cancelled sleep: %q %v", text, err)
	}
}

func TestScriptValidation(t *testing.T) {
	t.Parallel()
	for _, s := range []Script{
		{Turns: []Turn{{Steps: []Step{{}}}}},
		{Turns: []Turn{{Steps: []Step{{Text: ptr("a"), SleepMs: ptr(int64(1))}}}}},
		{Turns: []Turn{{Steps: []Step{{Text: ptr("a"), Arguments: []byte(`{}`)}}}}},
		{Turns: []Turn{{Steps: []Step{{Fail: &protocol.Error{Code: "nope"}}}}}},
	} {
		if _, err := New(s); err == nil {
			t.Errorf("script %+v accepted", s)
		}
	}
	path := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(path, []byte(`{"turns":[{"steps":[{"text":"hi"}]}],"extra":1}`), 0o600)
	if _, err := Load(path); err == nil {
		t.Fatal("a script with an unknown member loaded")
	}
}

// A paced turn's sleeps keep to its schedule: a timer that fires late
// shortens the next sleep, and a turn far behind does not sleep at all;
// an unpaced turn sleeps what it says.
func TestScriptPacedSleepsKeepSchedule(t *testing.T) {
	t.Parallel()
	ms := func(n int64) *int64 { return &n }
	steps := []Step{{SleepMs: ms(10)}, {Text: ptr("a")}, {SleepMs: ms(10)}, {Text: ptr("b")}, {SleepMs: ms(10)}, {SleepMs: ms(1)}}
	for _, paced := range []bool{false, true} {
		p, err := New(Script{Turns: []Turn{{Steps: steps, Paced: paced}}})
		if err != nil {
			t.Fatal(err)
		}
		clock := time.Unix(1000, 0)
		var slept []time.Duration
		p.now = func() time.Time { return clock }
		p.sleep = func(_ context.Context, d time.Duration) error {
			slept = append(slept, d)
			clock = clock.Add(d + 3*time.Millisecond) // each timer fires 3 ms late
			if d == 7*time.Millisecond && len(slept) == 3 {
				clock = clock.Add(20 * time.Millisecond) // then the turn falls far behind
			}
			return nil
		}
		text, _, err := play(t, p, context.Background(), model.Message{Role: model.RoleUser, Content: "go"})
		if err != nil || text != "ab" {
			t.Fatalf("paced=%v: %q %v", paced, text, err)
		}
		want := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, time.Millisecond}
		if paced {
			want = []time.Duration{10 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond} // the last sleep is past due
		}
		if !slices.Equal(slept, want) {
			t.Errorf("paced=%v: slept %v, want %v", paced, slept, want)
		}
	}
}
