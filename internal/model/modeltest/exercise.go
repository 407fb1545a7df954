package modeltest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// Subject is a remote provider under Exercise: how to make one, and how its
// API writes a stream of text, as complete Server-Sent Events.
type Subject struct {
	// New makes the provider for the API at baseURL (a fake's, or a closed
	// server's) with client (nil: the provider's own).
	New func(t testing.TB, baseURL string, client *http.Client) model.Provider
	// Key is the API key New configures: no error message may carry it.
	Key string
	// Path is where the provider asks for a stream.
	Path string
	// Header is added to every stream's response (the API's request id).
	Header http.Header
	// Open is the start of a stream whose text arrives in these deltas.
	Open func(deltas ...string) []string
	// Close ends a stream of text as a finished answer.
	Close []string

	// Name is the provider's Name.
	Name string
	// KeyEnv names the configuration a refused key's message points to.
	KeyEnv []string
	// Model is the model name New configures.
	Model string
	// CheckPath is where Check asks (GET); CheckBody the API's answer.
	CheckPath, CheckBody string
	// ErrorBody is the API's error body for an HTTP status with message.
	ErrorBody func(status int, message string) string
	// RateLimitHeader goes with a 429; the error must carry RetryAfter ms.
	RateLimitHeader http.Header
	RetryAfter      int64
	// RetryAfterMs is the provider's reading of a 429's headers at now;
	// RetryAfterCases are the API's own rate-limit headers it reads, at
	// RateLimitNow, besides the Retry-After ones every API has.
	RetryAfterMs    func(h http.Header, now time.Time) int64
	RetryAfterCases []RetryAfterCase
	// SetClock sets the provider's clock, which dates are read against.
	SetClock func(p model.Provider, now func() time.Time)
	// ErrorEvent is an error the API sends mid-stream; its message
	// contains ErrorMessage and its details hold ErrorDetails.
	ErrorEvent   string
	ErrorMessage string
	ErrorDetails map[string]any
	// Malformed is an event whose data is cut off mid-JSON.
	Malformed string
	// Usage is a whole stream of text reporting in and out tokens.
	Usage func(in, out int) []string

	// Start opens a stream whose answer has tool calls; ToolClose ends it.
	Start, ToolClose []string
	// ToolCall is one tool call whose arguments arrive in parts: the
	// answer's block (text counts) and its place among the calls.
	ToolCall func(block, call int, id, name string, parts ...string) []string
}

// Exercise runs the conformance suite every remote provider passes:
// streaming text, a stream cut short, cancellation, a server that is down,
// inputs refused before any request; the typed errors for 429, 5xx, 401 and
// 404, Retry-After, Check, usage, malformed events and tool calls assembled
// from split deltas. Subject supplies each API's wire (bodies, events,
// headers); each provider's own tests keep what only its API has. Long as
// a table is: one subtest per case, sharing the fake servers above them.
func Exercise(t *testing.T, s Subject) {
	stream := func(chunks ...[]string) http.HandlerFunc {
		var all []string
		for _, c := range chunks {
			all = append(all, c...)
		}
		return Stream(s.Path, s.Header, all...)
	}
	provider := func(t *testing.T, f *Fake) model.Provider { return s.New(t, f.URL(), f.Client()) }
	// hanging sends one delta and holds the stream open until the client
	// goes away, which it reports on closed.
	hanging := func(closed chan<- struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			stream(s.Open("Working"))(w, r)
			<-r.Context().Done()
			close(closed)
		}
	}

	t.Run("StreamText", func(t *testing.T) {
		t.Parallel()
		f := New(t, stream(s.Open("Three runs", " failed", " today."), s.Close))
		evs, err := Collect(context.Background(), provider(t, f), UserRequest())
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 3 || Text(evs) != "Three runs failed today." {
			t.Fatalf("events = %+v, want 3 text deltas", evs)
		}
		f.OnlyPost(t, s.Path)
	})
	t.Run("EOFMidStream", func(t *testing.T) {
		t.Parallel()
		// The body ends cleanly, but before the answer finished.
		f := New(t, stream(s.Open("Three runs")))
		evs, err := Collect(context.Background(), provider(t, f), UserRequest())
		WantError(t, err, protocol.ModelFailure, true)
		if Text(evs) != "Three runs" || len(ToolCalls(evs)) != 0 {
			t.Fatalf("events = %+v", evs)
		}
	})
	t.Run("BrokenConnection", func(t *testing.T) {
		t.Parallel()
		f := New(t, func(w http.ResponseWriter, r *http.Request) {
			stream(s.Open("Three runs"))(w, r)
			panic(http.ErrAbortHandler) // drop the connection mid-answer
		})
		evs, err := Collect(context.Background(), provider(t, f), UserRequest())
		WantError(t, err, protocol.ModelFailure, true)
		if Text(evs) != "Three runs" {
			t.Fatalf("events = %+v", evs)
		}
	})
	t.Run("NetworkFailure", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		p := s.New(t, url, nil)
		_, err := Collect(context.Background(), p, UserRequest())
		if pe := WantError(t, err, protocol.ModelFailure, true); s.Key != "" && strings.Contains(pe.Message, s.Key) {
			t.Fatalf("message leaks the key: %q", pe.Message)
		}
		if c, ok := p.(model.Checker); ok {
			WantError(t, c.Check(context.Background()), protocol.ModelFailure, true)
		}
	})
	t.Run("CancelMidStream", func(t *testing.T) {
		t.Parallel()
		closed := make(chan struct{})
		f := New(t, hanging(closed))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var evs []model.Event
		var gotErr error
		for ev, err := range provider(t, f).Stream(ctx, UserRequest()) {
			if err != nil {
				gotErr = err
				break
			}
			evs = append(evs, ev)
			cancel() // the user pressed stop after the first delta
		}
		if !errors.Is(gotErr, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", gotErr)
		}
		if Text(evs) != "Working" {
			t.Fatalf("events = %+v", evs)
		}
		waitClosed(t, closed)
	})
	t.Run("ConsumerStopsEarly", func(t *testing.T) {
		t.Parallel()
		closed := make(chan struct{})
		f := New(t, hanging(closed))
		for ev, err := range provider(t, f).Stream(context.Background(), UserRequest()) {
			if err != nil || ev.Text != "Working" {
				t.Fatalf("event %+v, error %v", ev, err)
			}
			break
		}
		waitClosed(t, closed)
	})
	t.Run("CancelBeforeStart", func(t *testing.T) {
		t.Parallel()
		f := New(t, stream(s.Open("hi"), s.Close))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := Collect(ctx, provider(t, f), UserRequest()); !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
	})
	t.Run("BadRequestInputs", func(t *testing.T) {
		t.Parallel()
		f := New(t, stream(s.Close))
		p := provider(t, f)
		_, err := Collect(context.Background(), p, model.Request{Messages: []model.Message{{Role: "system", Content: "x"}}})
		WantError(t, err, protocol.ModelFailure, false)
		for _, schema := range []string{`"object"`, `[1]`} {
			_, err = Collect(context.Background(), p, model.Request{Tools: []model.Tool{{Name: "t", Schema: []byte(schema)}}})
			WantError(t, err, protocol.ModelFailure, false)
		}
		if n := len(f.Requests()); n != 0 {
			t.Fatalf("bad inputs reached the server: %d requests", n)
		}
	})
	exerciseErrors(t, s)
	exerciseStreams(t, s)
}

// waitClosed waits for the fake server to see the client go away. The
// timeout only turns a hang into a failure; it asserts nothing about speed.
func waitClosed(t *testing.T, closed <-chan struct{}) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the server never saw the connection close")
	}
}

// UserRequest is a plain request: a system prompt and one user message.
func UserRequest() model.Request {
	return model.Request{System: "You are the Studio operator.", Messages: []model.Message{{Role: model.RoleUser, Content: "show failed runs"}}}
}

// ConversationRequest is a request with all a conversation can hold: a
// system prompt, two tool calls answered (one with an error), a reply
// after them, and two tools, one with a strict schema. Each provider's
// tests check how its API's request body writes it.
func ConversationRequest() model.Request {
	return model.Request{
		System: "You are the Studio operator. Current view: mission.",
		Messages: []model.Message{
			{Role: model.RoleUser, Content: "show failed runs and switch to dark mode"},
			{Role: model.RoleAssistant, Content: "Checking.", ToolCalls: []model.ToolCall{
				{ID: "call_1", Name: "query_runs", Arguments: []byte(`{"status":"failed"}`)},
				{ID: "call_2", Name: "set_theme", Arguments: []byte(`{"theme":"dark"}`)},
			}},
			{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "query_runs", Content: `{"runs":[]}`},
			{Role: model.RoleTool, ToolCallID: "call_2", ToolName: "set_theme", Content: "theme locked", ToolError: true},
			{Role: model.RoleAssistant, Content: "No failed runs; the theme is locked."},
			{Role: model.RoleUser, Content: "thanks"},
		},
		Tools: []model.Tool{
			{Name: "query_runs", Description: "Query workflow runs.", Schema: []byte(`{"type":"object","properties":{"status":{"type":"string","enum":["failed","ok"]}},"required":["status"],"additionalProperties":false}`)},
			{Name: "set_theme", Schema: []byte(`{"type":"object","properties":{"theme":{"type":"string"}}}`)},
		},
	}
}

// Text is the text of a stream's events, concatenated.
func Text(evs []model.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Kind == model.EventText {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

// ToolCalls are a stream's tool calls, in order.
func ToolCalls(evs []model.Event) []model.ToolCall {
	var out []model.ToolCall
	for _, e := range evs {
		if e.Kind == model.EventToolCall {
			out = append(out, e.ToolCall)
		}
	}
	return out
}

// WantError fails t unless err is a *protocol.Error with code and
// retryable, and returns it.
func WantError(t testing.TB, err error, code protocol.ErrorCode, retryable bool) *protocol.Error {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *protocol.Error", err, err)
	}
	if pe.Code != code || pe.Retryable != retryable {
		t.Fatalf("error = %s retryable=%v, want %s retryable=%v (%s)", pe.Code, pe.Retryable, code, retryable, pe.Message)
	}
	return pe
}
