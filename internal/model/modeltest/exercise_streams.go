package modeltest

import (
	"context"
	"net/http"
	"testing"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// exerciseStreams: usage, malformed events and tool calls assembled from
// the API's deltas.
func exerciseStreams(t *testing.T, s Subject) {
	stream := func(chunks ...[]string) http.HandlerFunc {
		var all []string
		for _, c := range chunks {
			all = append(all, c...)
		}
		return Stream(s.Path, s.Header, all...)
	}
	collect := func(t *testing.T, h http.HandlerFunc) ([]model.Event, error) {
		f := New(t, h)
		return Collect(context.Background(), s.New(t, f.URL(), f.Client()), UserRequest())
	}

	t.Run("UsageReported", func(t *testing.T) {
		t.Parallel()
		f := New(t, stream(s.Usage(472, 89)))
		if u := LastUsage(t, s.New(t, f.URL(), f.Client()), UserRequest()); u.InputTokens != 472 || u.OutputTokens != 89 {
			t.Fatalf("usage = %+v, want 472 in, 89 out", u)
		}
	})
	t.Run("MalformedEvent", func(t *testing.T) {
		t.Parallel()
		evs, err := collect(t, stream(s.Open("Hel"), []string{s.Malformed}, s.Close))
		WantError(t, err, protocol.ModelFailure, true)
		if Text(evs) != "Hel" {
			t.Fatalf("events before the error: %+v", evs)
		}
	})
	t.Run("ToolCallSplitArguments", func(t *testing.T) {
		t.Parallel()
		parts := []string{"", `{"`, `space": "hist`, `ory", "fil`, `ter": {"status"`, `: "failed"}`, `, "limit": 2`, `0}`}
		evs, err := collect(t, stream(s.Start, s.ToolCall(0, 0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "query_runs", parts...), s.ToolClose))
		if err != nil {
			t.Fatal(err)
		}
		calls := ToolCalls(evs)
		if len(evs) != 1 || len(calls) != 1 {
			t.Fatalf("events = %+v, want exactly one tool call", evs)
		}
		if c := calls[0]; c.ID != "call_DdmO9pD3xa9XTPNJ32zg2hcA" || c.Name != "query_runs" {
			t.Fatalf("call = %+v", c)
		}
		if got, want := string(calls[0].Arguments), `{"space":"history","filter":{"status":"failed"},"limit":20}`; got != want {
			t.Fatalf("arguments = %s, want %s", got, want)
		}
	})
	t.Run("TwoToolCalls", func(t *testing.T) {
		t.Parallel()
		evs, err := collect(t, stream(s.Start,
			s.ToolCall(0, 0, "call_A1", "navigate", `{"space":`, ` "mission"}`),
			s.ToolCall(1, 1, "call_B2", "set_theme", `{"theme": "da`, `rk"}`), s.ToolClose))
		if err != nil {
			t.Fatal(err)
		}
		calls := ToolCalls(evs)
		if len(calls) != 2 {
			t.Fatalf("calls = %+v", calls)
		}
		if calls[0].ID != "call_A1" || calls[0].Name != "navigate" || string(calls[0].Arguments) != `{"space":"mission"}` {
			t.Fatalf("first call = %+v (%s)", calls[0], calls[0].Arguments)
		}
		if calls[1].ID != "call_B2" || calls[1].Name != "set_theme" || string(calls[1].Arguments) != `{"theme":"dark"}` {
			t.Fatalf("second call = %+v (%s)", calls[1], calls[1].Arguments)
		}
	})
	t.Run("TextThenToolCall", func(t *testing.T) {
		t.Parallel()
		evs, err := collect(t, stream(s.Open("Let me look", " that up."),
			s.ToolCall(1, 0, "call_Q", "list_failed_runs", `{"since": "today"}`), s.ToolClose))
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 3 || evs[0].Kind != model.EventText || evs[1].Kind != model.EventText || evs[2].Kind != model.EventToolCall {
			t.Fatalf("events = %+v, want text, text, tool call", evs)
		}
		if Text(evs) != "Let me look that up." || evs[2].ToolCall.Name != "list_failed_runs" || string(evs[2].ToolCall.Arguments) != `{"since":"today"}` {
			t.Fatalf("events = %+v", evs)
		}
	})
	// A call whose arguments are cut short is the model's mistake, not the
	// provider's: it passes as it came, for the coordinator to answer with
	// a validation result the model can correct.
	t.Run("TruncatedArguments", func(t *testing.T) {
		t.Parallel()
		evs, err := collect(t, stream(s.Start, s.ToolCall(0, 0, "call_X", "navigate", `{"space": "hist`), s.ToolClose))
		if err != nil {
			t.Fatalf("a malformed call ended the stream: %v", err)
		}
		calls := ToolCalls(evs)
		if len(calls) != 1 || calls[0].Name != "navigate" || string(calls[0].Arguments) != `{"space": "hist` {
			t.Fatalf("calls = %+v", calls)
		}
	})
}
