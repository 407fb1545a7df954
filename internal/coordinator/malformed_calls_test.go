package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/openai"
	"github.com/studio/operator/internal/protocol"
)

// malformedCalls are the tool calls a model gets wrong, by kind: the tool's
// name and the arguments as the model streams them, and the reason the
// validation result must name.
var malformedCalls = []struct {
	kind, tool, args, reason string
}{
	{"truncated", "navigate", `{"space": "hist`, "truncated"},
	{"trailing", "navigate", `{"space":"history"}}`, "trailing_text"},
	{"two-objects", "navigate", `{"space":"history"} {"space":"library"}`, "trailing_text"},
	{"array", "navigate", `["history"]`, "not_object"},
	{"string", "set_theme", `"dark"`, "not_object"},
	{"number", "set_theme", `42`, "not_object"},
	{"null", "set_theme", `null`, "not_object"},
	{"duplicate", "set_theme", `{"theme":"dark","theme":"light"}`, "duplicate_name"},
	{"nan", "list_runs", `{"limit": NaN}`, "not_json"},
	{"single-quotes", "list_runs", `{'limit': 5}`, "not_json"},
	{"trailing-comma", "list_runs", `{"limit": 5,}`, "not_json"},
	{"huge-number", "list_runs", `{"limit": 1e999}`, "number_out_of_range"},
	{"deep", "list_runs", strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), "too_deep"},
	{"large", "list_runs", `{"playbook":"` + strings.Repeat("x", 70<<10) + `"}`, "too_large"},
	{"empty-name", "", `{}`, "no_tool_name"},
	{"unknown-name", "rm_rf", `{}`, "unknown_tool"},
	{"wrong-type", "navigate", `{"space": 5}`, ""},
	{"unknown-member", "set_theme", `{"theme":"dark","colour":"red"}`, ""},
	{"bad-enum", "set_theme", `{"theme":"sepia"}`, ""},
	{"path-as-id", "navigate", `{"space":"library","params":{"playbook":"../../x"}}`, ""},
}

// openAIToolServer is an OpenAI-compatible server: asked with a user
// instruction "call KIND" it streams that kind's tool call; asked again
// with the tool's result it records what the model was told and answers
// text, ending the turn.
func openAIToolServer(t *testing.T) (*httptest.Server, func(kind string) (string, bool)) {
	var mu sync.Mutex
	told := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string  `json:"role"`
				Content *string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		kind := ""
		for _, m := range body.Messages {
			if m.Role == "user" && m.Content != nil {
				kind = strings.TrimPrefix(*m.Content, "call ")
			}
		}
		last := body.Messages[len(body.Messages)-1]
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta string, finish string) {
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, f)
		}
		if last.Role == "tool" {
			mu.Lock()
			told[kind] = *last.Content
			mu.Unlock()
			chunk(`{"role":"assistant","content":"Understood."}`, "")
			chunk(`{}`, "stop")
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		for _, c := range malformedCalls {
			if c.kind != kind {
				continue
			}
			name, _ := json.Marshal(c.tool)
			args, _ := json.Marshal(c.args)
			chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":`+string(name)+`,"arguments":""}}]}`, "")
			// The arguments stream in pieces, as OpenAI sends them.
			a := string(args[1 : len(args)-1])
			for len(a) > 0 {
				n := min(len(a), 4096)
				for n < len(a) && a[n-1] == '\\' { // never split an escape
					n++
				}
				piece, _ := json.Marshal(json.RawMessage(`"` + a[:n] + `"`))
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(piece)+`}}]}`, "")
				a = a[n:]
			}
			chunk(`{}`, "tool_calls")
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		chunk(`{"role":"assistant","content":"no such kind"}`, "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, func(kind string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := told[kind]
		return s, ok
	}
}

// TestMalformedToolCallsAreAnsweredToTheModel: each kind of tool call a
// model gets wrong, streamed by an OpenAI-compatible server, is answered
// with a validation tool result naming the problem — which the model
// receives on its next request — and the turn completes. None ends the
// turn as model_failure or service_failure.
func TestMalformedToolCallsAreAnsweredToTheModel(t *testing.T) {
	t.Parallel()
	srv, told := openAIToolServer(t)
	p, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, engineOpts{provider: p})
	for _, c := range malformedCalls {
		t.Run(c.kind, func(t *testing.T) {
			conv := e.conversation()
			acc := e.submit(conv, "call "+c.kind)
			frames := e.waitDone(conv, acc.RequestID)
			k := kinds(frames)
			if k[len(k)-1] != "done:completed" {
				t.Fatalf("the turn did not complete: %v", k)
			}
			var res *protocol.ToolResultPayload
			for _, f := range ofRequest(frames, acc.RequestID) {
				if r, ok := f.Payload.(protocol.ToolResultPayload); ok {
					res = &r
				}
				if _, ok := f.Payload.(protocol.UICommandPayload); ok {
					t.Fatalf("a malformed call became an effect: %v", k)
				}
			}
			if res == nil || res.OK || res.Error == nil || res.Error.Code != protocol.Validation {
				t.Fatalf("tool result %+v: %v", res, k)
			}
			if c.reason != "" && res.Error.Details["reason"] != c.reason {
				t.Fatalf("reason %v, want %s: %s", res.Error.Details["reason"], c.reason, res.Error.Message)
			}
			msg, ok := told(c.kind)
			var got struct{ Error protocol.Error }
			if !ok || !strings.HasPrefix(msg, "error: ") || json.Unmarshal([]byte(strings.TrimPrefix(msg, "error: ")), &got) != nil ||
				got.Error.Code != protocol.Validation || got.Error.Message != res.Error.Message {
				t.Fatalf("the model was told %q, the result says %q", msg, res.Error.Message)
			}
		})
	}
}

// rawCallProvider calls a tool with arguments as raw bytes (no JSON
// transport could carry them: invalid UTF-8), then ends with text.
type rawCallProvider struct{ args []byte }

func (rawCallProvider) Name() string { return "raw" }

func (p rawCallProvider) Stream(_ context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		if len(req.CurrentToolResults()) > 0 {
			yield(model.Event{Kind: model.EventText, Text: "ok"}, nil)
			return
		}
		yield(model.Event{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: "call_1", Name: "set_theme", Arguments: p.args}}, nil)
	}
}

// TestInvalidUTF8ArgumentsAreAnswered: arguments that are not UTF-8 are
// a validation result too, and the turn completes.
func TestInvalidUTF8ArgumentsAreAnswered(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{provider: rawCallProvider{args: []byte("{\"theme\":\"da\xffrk\"}")}})
	conv := e.conversation()
	acc := e.submit(conv, "theme")
	frames := e.waitDone(conv, acc.RequestID)
	k := kinds(frames)
	if k[len(k)-1] != "done:completed" {
		t.Fatalf("the turn did not complete: %v", k)
	}
	for _, f := range ofRequest(frames, acc.RequestID) {
		if r, ok := f.Payload.(protocol.ToolResultPayload); ok {
			if r.Error == nil || r.Error.Details["reason"] != "invalid_utf8" {
				t.Fatalf("result %+v", r)
			}
			return
		}
	}
	t.Fatalf("no tool result: %v", k)
}
