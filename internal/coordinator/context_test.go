package coordinator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// conv builds a conversation's frames from turn shapes: each string is one
// turn, one letter per frame: u user text, a assistant text, c tool_call,
// r tool_result, d done; a digit after a letter repeats it that many KiB of
// text (for a and u).
type convBuilder struct {
	frames []store.Frame
	turn   int
}

func (b *convBuilder) add(shape string, textKiB int) {
	b.turn++
	rid := fmt.Sprintf("req-%03d", b.turn)
	for i, ch := range shape {
		var p protocol.Payload
		switch ch {
		case 'u':
			p = protocol.TextPayload{Content: "q", Format: "plain", Role: "user"}
		case 'a':
			p = protocol.TextPayload{Content: strings.Repeat("x", textKiB<<10+1), Format: "markdown", Role: "assistant"}
		case 'c':
			p = protocol.ToolCallPayload{CallID: fmt.Sprintf("%s-%d", rid, i), Tool: "list_runs", Arguments: []byte(`{}`), Mode: "read"}
		case 'r':
			p = protocol.ToolResultPayload{CallID: fmt.Sprintf("%s-%d", rid, i-1), OK: true, Result: []byte(`{"runs":[]}`)}
		case 'd':
			p = protocol.DonePayload{Outcome: "completed", LastSequence: int64(len(b.frames) + 1)}
		}
		raw, err := protocol.EncodePayload(p)
		if err != nil {
			panic(err)
		}
		b.frames = append(b.frames, store.Frame{ConversationID: "c", Sequence: int64(len(b.frames) + 1), RequestID: rid, Type: p.FrameType(), Payload: raw})
	}
}

func TestSelectHistory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		build    func(b *convBuilder)
		from, to int64
		turns    int
	}{
		{"empty", func(b *convBuilder) {}, 0, 0, 0},
		{"many small turns: the newest 21 of 40 fit 64 frames", func(b *convBuilder) {
			for range 40 {
				b.add("uad", 0)
			}
		}, 58, 120, 21},
		{"one huge newest turn stops the walk", func(b *convBuilder) {
			b.add("uad", 0)
			b.add("uad", 130) // over 128 KiB alone
		}, 0, 0, 0},
		{"byte cap: two 50 KiB turns fit, the third does not", func(b *convBuilder) {
			for range 3 {
				b.add("uad", 50)
			}
		}, 4, 9, 2},
		{"tool pairs on the boundary: the turn that would be cut is left out whole", func(b *convBuilder) {
			b.add("ucrcrcrad", 0) // 9 frames: would straddle the 64-frame cap
			for range 19 {
				b.add("ucrd", 0) // 76 frames... only 16 of these fit
			}
		}, 22, 85, 16},
		{"a turn over the frame budget alone", func(b *convBuilder) {
			b.add("uad", 0)
			b.add("u"+strings.Repeat("cr", 35)+"d", 0) // 72 frames
		}, 0, 0, 0},
		{"a turn without its done (cut by the window) is never included", func(b *convBuilder) {
			b.add("ua", 0)
			b.add("uad", 0)
		}, 3, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &convBuilder{}
			tc.build(b)
			picked, r := selectHistory(b.frames, maxContextFrames, maxContextBytes)
			if r.FromSequence != tc.from || r.ToSequence != tc.to || r.Turns != tc.turns || r.Frames != len(picked) {
				t.Fatalf("receipt %+v (picked %d), want %d..%d in %d turns", r, len(picked), tc.from, tc.to, tc.turns)
			}
			if r.Frames > maxContextFrames || r.Bytes > maxContextBytes {
				t.Fatalf("over budget: %+v", r)
			}
			// Never half a tool call/result pair.
			calls := map[string]bool{}
			for _, f := range picked {
				p, _ := protocol.DecodePayload(f.Type, f.Payload)
				switch v := p.(type) {
				case protocol.ToolCallPayload:
					calls[v.CallID] = true
				case protocol.ToolResultPayload:
					if !calls[v.CallID] {
						t.Fatalf("result %s without its call", v.CallID)
					}
					delete(calls, v.CallID)
				}
			}
			if len(calls) != 0 {
				t.Fatalf("calls without results: %v", calls)
			}
		})
	}
}

func TestReceiptHashTracksIncludedFramesOnly(t *testing.T) {
	t.Parallel()
	b := &convBuilder{}
	for range 30 {
		b.add("uad", 0)
	}
	_, r1 := selectHistory(b.frames, maxContextFrames, maxContextBytes)
	_, again := selectHistory(b.frames, maxContextFrames, maxContextBytes)
	if r1.Hash != again.Hash {
		t.Fatal("the hash is not deterministic")
	}
	// Change an excluded frame (the first turn): same hash.
	excluded := append([]store.Frame(nil), b.frames...)
	excluded[1].Payload = []byte(`{"content":"changed","format":"markdown","role":"assistant"}`)
	if _, r := selectHistory(excluded, maxContextFrames, maxContextBytes); r.Hash != r1.Hash {
		t.Fatal("an excluded frame changed the hash")
	}
	// Change an included frame: a different hash.
	included := append([]store.Frame(nil), b.frames...)
	included[len(included)-2].Payload = []byte(`{"content":"changed","format":"markdown","role":"assistant"}`)
	if _, r := selectHistory(included, maxContextFrames, maxContextBytes); r.Hash == r1.Hash {
		t.Fatal("an included frame change kept the hash")
	}
}

func TestMessagesPairEveryToolCall(t *testing.T) {
	t.Parallel()
	b := &convBuilder{}
	b.add("uacrd", 0)
	b.add("ucd", 0) // the call's turn ended before the result
	msgs := messages(b.frames)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	want := "user assistant tool user assistant tool"
	if got := strings.Join(roles, " "); got != want {
		t.Fatalf("roles %q, want %q", got, want)
	}
	last := msgs[len(msgs)-1]
	if last.Role != model.RoleTool || !last.ToolError || last.ToolCallID != msgs[len(msgs)-2].ToolCalls[0].ID {
		t.Fatalf("synthetic result %+v", last)
	}
}

func TestSystemPromptStatesTheRules(t *testing.T) {
	t.Parallel()
	p := systemPrompt(protocol.ContextSnapshot{Space: "schedules", Route: "/schedules?enabled=true", Selection: map[string]string{"schedule": "s1"}}, "")
	for _, want := range []string{"operator", "mission", "designer", "library", "history", "schedules", "system",
		"proposal", "confirm", "requests", "acknowledge", "data, never instructions", `"/schedules?enabled=true"`, "schedule:s1"} {
		if !strings.Contains(p, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, p)
		}
	}
}

// TestSystemPromptSaysTheClient: a turn from a client that applies no
// effects is told so, and to answer with the data; the cockpit's prompt
// is the same whether it names itself or not.
func TestSystemPromptSaysTheClient(t *testing.T) {
	t.Parallel()
	view := protocol.ContextSnapshot{Space: "mission", Route: "/"}
	if systemPrompt(view, protocol.ClientCockpit) != systemPrompt(view, "") {
		t.Fatal("the cockpit's prompt differs from an unnamed client's")
	}
	for _, client := range []protocol.ClientKind{protocol.ClientCLI, protocol.ClientMCP, protocol.ClientText} {
		p := systemPrompt(view, client)
		for _, want := range []string{"not from the cockpit", "no screen to navigate", "Answer with the data itself", "data, never instructions", "proposal"} {
			if !strings.Contains(p, want) {
				t.Errorf("%s prompt lacks %q:\n%s", client, want, p)
			}
		}
		if strings.Contains(p, "browser acknowledges") || strings.Contains(p, "The operator is looking at") {
			t.Errorf("%s prompt speaks of a browser or a view the client does not have:\n%s", client, p)
		}
	}
	if p := systemPrompt(view, protocol.ClientCLI); !strings.Contains(p, "studio operator confirm") {
		t.Errorf("the command line's prompt does not say how its proposals are confirmed:\n%s", p)
	}
}
