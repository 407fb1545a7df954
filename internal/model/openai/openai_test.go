package openai

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

const testKey = "sk-test-4f9c2b7e1d8a6053c0ffee1234"

// provider is the provider for the fake f, with key.
func provider(t *testing.T, f *modeltest.Fake, key string) *Provider {
	t.Helper()
	p, err := New(Config{BaseURL: f.URL() + "/v1", APIKey: key, Model: "gpt-4.1-mini", HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sseHandler replays data lines as a chat-completions stream, flushing each.
func sseHandler(lines ...string) func(http.ResponseWriter, *http.Request) {
	events := make([]string, len(lines))
	for i, l := range lines {
		events[i] = "data: " + l + "\n\n"
	}
	return modeltest.Stream("/v1/chat/completions", nil, events...)
}

// chunk builds one realistic chat.completion.chunk with the given choice body.
func chunk(choice string) string {
	return `{"id":"chatcmpl-BRxJ3kq8mT0pZ2vYhL7cW9nE4aFgD","object":"chat.completion.chunk","created":1745834101,"model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":"fp_6f2eabb9a5","choices":[` + choice + `],"usage":null,"obfuscation":"kq3"}`
}

func textChunk(s string) string {
	b, _ := json.Marshal(s)
	return chunk(`{"index":0,"delta":{"content":` + string(b) + `},"logprobs":null,"finish_reason":null}`)
}

var (
	roleChunk = chunk(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`)
	stopChunk = chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`)
	toolStop  = chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}`)
)

func toolStart(index int, id, name string) string {
	return chunk(fmt.Sprintf(`{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}`, index, id, name))
}

func toolArgs(index int, part string) string {
	b, _ := json.Marshal(part)
	return chunk(fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"logprobs":null,"finish_reason":null}`, index, b))
}

// The chat-completions API may interleave the deltas of parallel calls;
// they are assembled by index and yielded in index order.
func TestStreamInterleavedToolCalls(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, sseHandler(toolStart(1, "call_B2", "set_theme"), toolStart(0, "call_A1", "navigate"),
		toolArgs(0, `{"space":`), toolArgs(1, `{"theme"`), toolArgs(1, `:"dark"}`), toolArgs(0, `"mission"}`),
		toolStop, "[DONE]"))
	evs, err := modeltest.Collect(context.Background(), provider(t, f, testKey), modeltest.UserRequest())
	if err != nil {
		t.Fatal(err)
	}
	calls := modeltest.ToolCalls(evs)
	if len(calls) != 2 || calls[0].ID != "call_A1" || string(calls[0].Arguments) != `{"space":"mission"}` ||
		calls[1].ID != "call_B2" || string(calls[1].Arguments) != `{"theme":"dark"}` {
		t.Fatalf("calls = %+v", calls)
	}
}

// Ollama sends each call whole in one delta, with no [DONE]-only quirks but
// sometimes without an id; the provider makes one up.
func TestStreamWholeToolCallWithoutID(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, sseHandler(
		`{"id":"chatcmpl-475","object":"chat.completion.chunk","created":1745834101,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"index":0,"type":"function","function":{"name":"set_theme","arguments":"{\"theme\":\"dark\"}"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-475","object":"chat.completion.chunk","created":1745834101,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}`,
		"[DONE]"))
	evs, err := modeltest.Collect(context.Background(), provider(t, f, ""), modeltest.UserRequest())
	if err != nil {
		t.Fatal(err)
	}
	calls := modeltest.ToolCalls(evs)
	if len(calls) != 1 || calls[0].Name != "set_theme" || !strings.HasPrefix(calls[0].ID, "call_") || string(calls[0].Arguments) != `{"theme":"dark"}` {
		t.Fatalf("calls = %+v", calls)
	}
}

func TestStreamInvalidArguments(t *testing.T) {
	t.Parallel()
	// Arguments that are JSON but not an object, or not JSON, pass as they
	// came (truncated ones are in the conformance suite): the coordinator
	// answers the model with what is wrong.
	for name, args := range map[string]string{"array": `[1,2]`, "string": `"dark"`, "trailing": `{"theme":"dark"}}`} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := modeltest.New(t, sseHandler(toolStart(0, "call_X", "navigate"), toolArgs(0, args), toolStop, "[DONE]"))
			evs, err := modeltest.Collect(context.Background(), provider(t, f, testKey), modeltest.UserRequest())
			if err != nil {
				t.Fatal(err)
			}
			if calls := modeltest.ToolCalls(evs); len(calls) != 1 || string(calls[0].Arguments) != args {
				t.Fatalf("calls = %+v", calls)
			}
		})
	}
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, sseHandler(textChunk("ok"), stopChunk, "[DONE]"))
	req := modeltest.ConversationRequest()
	if _, err := modeltest.Collect(context.Background(), provider(t, f, testKey), req); err != nil {
		t.Fatal(err)
	}
	r := f.OnlyPost(t, "/v1/chat/completions")
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Fatalf("Authorization = %q", got)
	}
	var body struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string         `json:"name"`
				Description string         `json:"description"`
				Parameters  map[string]any `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	if body.Model != "gpt-4.1-mini" || !body.Stream {
		t.Fatalf("model=%q stream=%v", body.Model, body.Stream)
	}
	if len(body.Messages) != 7 {
		t.Fatalf("messages: %s", r.Body)
	}
	m := body.Messages
	if m[0].Role != "system" || string(m[0].Content) != `"You are the Studio operator. Current view: mission."` {
		t.Fatalf("system message: %+v", m[0])
	}
	if m[1].Role != "user" || string(m[1].Content) != `"show failed runs and switch to dark mode"` {
		t.Fatalf("user message: %+v", m[1])
	}
	if m[2].Role != "assistant" || string(m[2].Content) != `"Checking."` || len(m[2].ToolCalls) != 2 {
		t.Fatalf("assistant message: %+v", m[2])
	}
	tc := m[2].ToolCalls[1]
	if tc.ID != "call_2" || tc.Type != "function" || tc.Function.Name != "set_theme" || tc.Function.Arguments != `{"theme":"dark"}` {
		t.Fatalf("assistant tool call: %+v", tc)
	}
	if m[3].Role != "tool" || m[3].ToolCallID != "call_1" || string(m[3].Content) != `"{\"runs\":[]}"` {
		t.Fatalf("tool message: %+v", m[3])
	}
	if m[4].Role != "tool" || m[4].ToolCallID != "call_2" || !strings.Contains(string(m[4].Content), "error") {
		t.Fatalf("tool error message: %+v", m[4])
	}
	if m[5].Role != "assistant" || m[6].Role != "user" || string(m[6].Content) != `"thanks"` {
		t.Fatalf("tail: %+v", m[5:])
	}
	if len(body.Tools) != 2 || body.Tools[0].Type != "function" || body.Tools[0].Function.Name != "query_runs" || body.Tools[0].Function.Description != "Query workflow runs." {
		t.Fatalf("tools: %s", r.Body)
	}
	params := body.Tools[0].Function.Parameters
	if params["type"] != "object" || params["additionalProperties"] != false || fmt.Sprint(params["required"]) != "[status]" {
		t.Fatalf("schema: %v", params)
	}
	if enum := params["properties"].(map[string]any)["status"].(map[string]any)["enum"]; fmt.Sprint(enum) != "[failed ok]" {
		t.Fatalf("schema properties: %v", params)
	}
}

func TestNoKeyNoAuthorization(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, sseHandler(textChunk("hi"), stopChunk, "[DONE]"))
	if _, err := modeltest.Collect(context.Background(), provider(t, f, ""), modeltest.UserRequest()); err != nil {
		t.Fatal(err)
	}
	if got := f.Requests()[0].Header.Get("Authorization"); got != "" {
		t.Fatalf("Authorization = %q, want none", got)
	}
}

func TestInsufficientQuotaIsNotRetryable(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	})
	_, err := modeltest.Collect(context.Background(), provider(t, f, testKey), modeltest.UserRequest())
	modeltest.WantError(t, err, protocol.ModelFailure, false)
}

func TestForbidden(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"error":{"message":"You are not allowed to sample from this model","type":"invalid_request_error","param":null,"code":null}}`)
	})
	_, err := modeltest.Collect(context.Background(), provider(t, f, testKey), modeltest.UserRequest())
	if pe := modeltest.WantError(t, err, protocol.ModelFailure, false); !strings.Contains(pe.Message, "OPENAI_API_KEY") {
		t.Fatalf("message = %q", pe.Message)
	}
}

// Ollama's and vLLM's ways of refusing an unknown model (OpenAI's is in the
// conformance suite).
func TestBadModelCompatibleServers(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		status int
		body   string
	}{
		"ollama 404": {404, `{"error":"model \"gpt-4.1-mini\" not found, try pulling it first"}`},
		"vllm 400":   {400, `{"object":"error","message":"The model ` + "`gpt-4.1-mini`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := modeltest.New(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})
			_, err := modeltest.Collect(context.Background(), provider(t, f, testKey), modeltest.UserRequest())
			pe := modeltest.WantError(t, err, protocol.ModelFailure, false)
			if !strings.Contains(pe.Message, "STUDIO_MODEL_NAME") || !strings.Contains(pe.Message, "gpt-4.1-mini") {
				t.Fatalf("message = %q", pe.Message)
			}
			if !strings.Contains(pe.Message, "exist") && !strings.Contains(pe.Message, "pulling") {
				t.Fatalf("message lost the server's explanation: %q", pe.Message)
			}
		})
	}
}

func TestCheckSendsKey(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[]}`)
	})
	if err := provider(t, f, testKey).Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.Requests()[0].Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Fatalf("Authorization = %q", got)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "STUDIO_MODEL_NAME") {
		t.Fatalf("missing model: %v", err)
	}
	if _, err := New(Config{Model: "m", BaseURL: "localhost:11434"}); err == nil {
		t.Fatal("relative base URL accepted")
	}
	p, err := New(Config{Model: "m"})
	if err != nil || p.cfg.BaseURL != DefaultBaseURL {
		t.Fatalf("default base URL: %v %+v", err, p)
	}
}

// The provider asks for usage (stream_options.include_usage); the
// conformance suite checks it reports the usage chunk.
func TestRequestAsksForUsage(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t, sseHandler(roleChunk, textChunk("ok"), stopChunk, "[DONE]"))
	if _, err := modeltest.Collect(context.Background(), provider(t, f, testKey), modeltest.UserRequest()); err != nil {
		t.Fatal(err)
	}
	var body struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(f.Requests()[0].Body, &body); err != nil || !body.StreamOptions.IncludeUsage {
		t.Fatalf("request does not ask for usage: %s (%v)", f.Requests()[0].Body, err)
	}
}

// TestConformance: the suite every remote provider passes, on the
// chat-completions stream.
func TestConformance(t *testing.T) {
	t.Parallel()
	data := func(line string) string { return "data: " + line + "\n\n" }
	modeltest.Exercise(t, modeltest.Subject{
		New: func(t testing.TB, baseURL string, client *http.Client) model.Provider {
			p, err := New(Config{BaseURL: baseURL + "/v1", APIKey: testKey, Model: "gpt-4.1-mini", HTTPClient: client})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Key:  testKey,
		Path: "/v1/chat/completions",
		Open: func(deltas ...string) []string {
			evs := []string{data(roleChunk)}
			for _, d := range deltas {
				evs = append(evs, data(textChunk(d)))
			}
			return evs
		},
		Close: []string{data(stopChunk), data("[DONE]")},

		Name:      "openai",
		KeyEnv:    []string{"STUDIO_OPENAI_API_KEY", "OPENAI_API_KEY"},
		Model:     "gpt-4.1-mini",
		CheckPath: "/v1/models",
		CheckBody: `{"object":"list","data":[{"id":"gpt-4.1-mini","object":"model","created":1744316542,"owned_by":"system"},{"id":"llama3.2:latest","object":"model","created":1745000000,"owned_by":"library"}]}`,
		ErrorBody: func(status int, message string) string {
			kind, code := "server_error", "null"
			switch status {
			case 401:
				kind, code = "invalid_request_error", `"invalid_api_key"`
			case 404:
				kind, code = "invalid_request_error", `"model_not_found"`
			case 429:
				kind, code = "tokens", `"rate_limit_exceeded"`
			}
			b, _ := json.Marshal(message)
			return fmt.Sprintf(`{"error":{"message":%s,"type":%q,"param":null,"code":%s}}`, b, kind, code)
		},
		RateLimitHeader: http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"},
			"X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"1.5s"}},
		RetryAfter:   1500,
		RetryAfterMs: retryAfterMs,
		SetClock:     func(p model.Provider, now func() time.Time) { p.(*Provider).now = now },
		RetryAfterCases: []modeltest.RetryAfterCase{
			{Name: "exhausted tokens", Header: map[string]string{
				"x-ratelimit-remaining-requests": "4999", "x-ratelimit-reset-requests": "12ms",
				"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}, Want: 360000},
			{Name: "nearest reset", Header: map[string]string{"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "20ms"}, Want: 20},
		},
		ErrorEvent:   data(`{"error":{"message":"The server had an error processing your request.","type":"server_error","param":null,"code":null}}`),
		ErrorMessage: "server had an error",
		Malformed:    data(`{"id":"chatcmpl-x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo`),
		Usage: func(in, out int) []string {
			usage := fmt.Sprintf(`{"id":"chatcmpl-BRxJ3kq8mT0pZ2vYhL7cW9nE4aFgD","object":"chat.completion.chunk","created":1745834101,"model":"gpt-4.1-mini-2025-04-14","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
			return []string{data(roleChunk), data(textChunk("ok")), data(stopChunk), data(usage), data("[DONE]")}
		},

		ToolClose: []string{data(toolStop), data("[DONE]")},
		ToolCall: func(block, call int, id, name string, parts ...string) []string {
			evs := []string{data(toolStart(call, id, name))}
			for _, p := range parts {
				evs = append(evs, data(toolArgs(call, p)))
			}
			return evs
		},
	})
}
