package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/modeltest"
	"github.com/studio/operator/internal/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	testKey   = "sk-ant-api03-Zx9Qm4Lr7Tb2Vw8Kp1Jd6Hs3Gf0Nc5Ya-9f8e7d6c"
	testModel = "claude-sonnet-4-5"
)

// provider is the provider for the fake f.
func provider(t *testing.T, f *modeltest.Fake) *Provider {
	t.Helper()
	p, err := New(Config{BaseURL: f.URL(), APIKey: testKey, Model: testModel, HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sse is one server-sent event as the Messages API writes it.
func sse(event, data string) string { return "event: " + event + "\ndata: " + data + "\n\n" }

// sseHandler replays events, flushing after each.
func sseHandler(events ...string) func(http.ResponseWriter, *http.Request) {
	return modeltest.Stream("/v1/messages", http.Header{"Request-Id": {"req_011CZtestA1b2C3d4E5f6G7h8"}}, events...)
}

var (
	messageStart = sse("message_start", `{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2,"service_tier":"standard"}}}`)
	ping         = sse("ping", `{"type": "ping"}`)
	messageStop  = sse("message_stop", `{"type":"message_stop"}`)
)

func textStart(i int) string {
	return sse("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
}

func textDelta(i int, s string) string {
	b, _ := json.Marshal(s)
	return sse("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, b))
}

func toolStart(i int, id, name string) string {
	return sse("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, i, id, name))
}

func inputDelta(i int, part string) string {
	b, _ := json.Marshal(part)
	return sse("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, b))
}

func blockStop(i int) string {
	return sse("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}

func messageDelta(reason string) string {
	return sse("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":89}}`, reason))
}

func TestStreamToolWithoutInput(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, sseHandler(messageStart, toolStart(0, "toolu_E", "refresh"), inputDelta(0, ""), blockStop(0), messageDelta("tool_use"), messageStop))
	evs, err := modeltest.Collect(context.Background(), provider(t, f), modeltest.UserRequest())
	if err != nil {
		t.Fatal(err)
	}
	if calls := modeltest.ToolCalls(evs); len(calls) != 1 || string(calls[0].Arguments) != `{}` {
		t.Fatalf("calls = %+v", calls)
	}
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, sseHandler(messageStart, textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn"), messageStop))
	req := modeltest.ConversationRequest()
	if _, err := modeltest.Collect(context.Background(), provider(t, f), req); err != nil {
		t.Fatal(err)
	}
	r := f.OnlyPost(t, "/v1/messages")
	if r.Header.Get("Anthropic-Version") == "" {
		t.Fatalf("no anthropic-version header: %v", r.Header)
	}
	if !strings.Contains(r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"), testKey) {
		t.Fatalf("the key was not sent: %v", r.Header)
	}
	var body struct {
		Model     string `json:"model"`
		MaxTokens int64  `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		System    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				IsError   *bool           `json:"is_error"`
				Content   []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	if body.Model != testModel || body.MaxTokens != DefaultMaxTokens || !body.Stream {
		t.Fatalf("model=%q max_tokens=%d stream=%v", body.Model, body.MaxTokens, body.Stream)
	}
	if len(body.System) != 1 || body.System[0].Type != "text" || body.System[0].Text != req.System {
		t.Fatalf("system: %s", r.Body)
	}
	m := body.Messages
	if len(m) != 5 {
		t.Fatalf("want user, assistant, user(tool results), assistant, user; got %s", r.Body)
	}
	if m[0].Role != "user" || len(m[0].Content) != 1 || m[0].Content[0].Type != "text" || m[0].Content[0].Text != "show failed runs and switch to dark mode" {
		t.Fatalf("user message: %+v", m[0])
	}
	a := m[1]
	if a.Role != "assistant" || len(a.Content) != 3 || a.Content[0].Type != "text" || a.Content[0].Text != "Checking." {
		t.Fatalf("assistant message: %+v", a)
	}
	if tu := a.Content[2]; tu.Type != "tool_use" || tu.ID != "call_2" || tu.Name != "set_theme" || string(tu.Input) != `{"theme":"dark"}` {
		t.Fatalf("tool_use block: %+v (%s)", tu, tu.Input)
	}
	res := m[2]
	if res.Role != "user" || len(res.Content) != 2 {
		t.Fatalf("tool results must share one user message: %+v", res)
	}
	if tr := res.Content[0]; tr.Type != "tool_result" || tr.ToolUseID != "call_1" || tr.IsError != nil || len(tr.Content) != 1 || tr.Content[0].Text != `{"runs":[]}` {
		t.Fatalf("first tool_result: %+v", tr)
	}
	if tr := res.Content[1]; tr.Type != "tool_result" || tr.ToolUseID != "call_2" || tr.IsError == nil || !*tr.IsError || tr.Content[0].Text != "theme locked" {
		t.Fatalf("second tool_result: %+v", tr)
	}
	if m[3].Role != "assistant" || m[4].Role != "user" || m[4].Content[0].Text != "thanks" {
		t.Fatalf("tail: %+v", m[3:])
	}
	if len(body.Tools) != 2 || body.Tools[0].Name != "query_runs" || body.Tools[0].Description != "Query workflow runs." {
		t.Fatalf("tools: %s", r.Body)
	}
	var schema map[string]any
	if err := json.Unmarshal(body.Tools[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["type"] != "object" || schema["additionalProperties"] != false || fmt.Sprint(schema["required"]) != "[status]" ||
		fmt.Sprint(schema["properties"].(map[string]any)["status"].(map[string]any)["enum"]) != "[failed ok]" {
		t.Fatalf("input_schema: %s", body.Tools[0].InputSchema)
	}
}

// A 429 with only the Messages API's reset headers waits until the reset.
func TestRateLimitResetEndToEnd(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f := modeltest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Anthropic-Ratelimit-Output-Tokens-Remaining", "0")
		w.Header().Set("Anthropic-Ratelimit-Output-Tokens-Reset", "2026-03-01T12:00:07Z")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Output token rate limit exceeded."}}`)
	})
	p := provider(t, f)
	p.now = func() time.Time { return now }
	_, err := modeltest.Collect(context.Background(), p, modeltest.UserRequest())
	if pe := modeltest.WantError(t, err, protocol.RateLimited, true); pe.RetryAfterMs != 7000 {
		t.Fatalf("RetryAfterMs = %d", pe.RetryAfterMs)
	}
}

// An invalid model name is refused with a 400, not the 404 of an unknown one.
func TestBadModelName(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"model: String should match pattern"}}`)
	})
	p := provider(t, f)
	_, err := modeltest.Collect(context.Background(), p, modeltest.UserRequest())
	for _, err := range []error{err, p.Check(context.Background())} {
		pe := modeltest.WantError(t, err, protocol.ModelFailure, false)
		if !strings.Contains(pe.Message, "STUDIO_MODEL_NAME") || !strings.Contains(pe.Message, testModel) {
			t.Fatalf("message = %q", pe.Message)
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{APIKey: testKey}); err == nil || !strings.Contains(err.Error(), "STUDIO_MODEL_NAME") {
		t.Fatalf("missing model: %v", err)
	}
	if _, err := New(Config{Model: testModel}); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Fatalf("missing key: %v", err)
	} else if strings.Contains(err.Error(), testKey) {
		t.Fatal("leak")
	}
	p, err := New(Config{Model: testModel, APIKey: testKey})
	if err != nil || p.cfg.BaseURL != DefaultBaseURL || p.cfg.MaxTokens != DefaultMaxTokens {
		t.Fatalf("defaults: %v %+v", err, p)
	}
}

// TestConformance: the suite every remote provider passes, on the Messages
// API's stream (a ping among the deltas, as the API sends).
func TestConformance(t *testing.T) {
	t.Parallel()
	modeltest.Exercise(t, modeltest.Subject{
		New: func(t testing.TB, baseURL string, client *http.Client) model.Provider {
			p, err := New(Config{BaseURL: baseURL, APIKey: testKey, Model: testModel, HTTPClient: client})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Key:    testKey,
		Path:   "/v1/messages",
		Header: http.Header{"Request-Id": {"req_011CZtestA1b2C3d4E5f6G7h8"}},
		Open: func(deltas ...string) []string {
			evs := []string{messageStart, textStart(0), ping}
			for _, d := range deltas {
				evs = append(evs, textDelta(0, d))
			}
			return evs
		},
		Close: []string{blockStop(0), messageDelta("end_turn"), messageStop},

		Name:      "anthropic",
		KeyEnv:    []string{"ANTHROPIC_API_KEY"},
		Model:     testModel,
		CheckPath: "/v1/models/" + testModel,
		CheckBody: `{"type":"model","id":"claude-sonnet-4-5-20250929","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}`,
		ErrorBody: func(status int, message string) string {
			kind := map[int]string{401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}[status]
			if kind == "" {
				kind = "api_error"
			}
			b, _ := json.Marshal(message)
			return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%s},"request_id":"req_011CZerr"}`, kind, b)
		},
		RateLimitHeader: http.Header{"Retry-After": {"13"},
			"Anthropic-Ratelimit-Requests-Remaining": {"0"}, "Anthropic-Ratelimit-Requests-Reset": {"2026-03-01T12:00:13Z"}},
		RetryAfter:   13000,
		RetryAfterMs: retryAfterMs,
		SetClock:     func(p model.Provider, now func() time.Time) { p.(*Provider).now = now },
		RetryAfterCases: []modeltest.RetryAfterCase{
			{Name: "exhausted tokens reset", Header: map[string]string{
				"anthropic-ratelimit-requests-remaining": "40", "anthropic-ratelimit-requests-reset": "2026-03-01T12:00:01Z",
				"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": "2026-03-01T12:00:30Z"}, Want: 30000},
			{Name: "nearest reset", Header: map[string]string{
				"anthropic-ratelimit-input-tokens-reset": "2026-03-01T12:00:02Z", "anthropic-ratelimit-output-tokens-reset": "2026-03-01T12:00:09Z"}, Want: 2000},
			{Name: "garbage", Header: map[string]string{"anthropic-ratelimit-tokens-reset": "later"}, Want: 0},
		},
		ErrorEvent:   sse("error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`),
		ErrorMessage: "Overloaded",
		ErrorDetails: map[string]any{"httpStatus": 529, "midStream": true},
		Malformed:    sse("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo`),
		Usage: func(in, out int) []string {
			start := strings.Replace(messageStart, `"input_tokens":472`, fmt.Sprintf(`"input_tokens":%d`, in), 1)
			end := strings.Replace(messageDelta("end_turn"), `"output_tokens":89`, fmt.Sprintf(`"output_tokens":%d`, out), 1)
			return []string{start, textStart(0), textDelta(0, "ok"), blockStop(0), end, messageStop}
		},

		Start:     []string{messageStart},
		ToolClose: []string{messageDelta("tool_use"), messageStop},
		ToolCall: func(block, call int, id, name string, parts ...string) []string {
			var evs []string
			if block > call {
				evs = append(evs, blockStop(block-1)) // the text before the call ends first
			}
			evs = append(evs, toolStart(block, id, name))
			for _, p := range parts {
				evs = append(evs, inputDelta(block, p))
			}
			return append(evs, blockStop(block))
		},
	})
}
