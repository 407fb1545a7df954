package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/anthropic"
	"github.com/studio/operator/internal/model/openai"
	"github.com/studio/operator/internal/protocol"
)

// A full turn through each real provider SDK against a local fake server: a
// read tool round trip, then a proposal, then (after confirmation) the answer.
// The fake decides each answer from how many tool results the request holds.

type toolStep struct{ name, args string }

var providerRounds = []toolStep{
	{"list_runs", `{"status":"failed"}`},
	{"launch_playbook", `{"playbook":"audit-repo","args":{"repo":"x"}}`},
	{"", "All done: the run is queued."},
}

func sse(w http.ResponseWriter, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		io.WriteString(w, e+"\n\n")
		w.(http.Flusher).Flush()
	}
}

func fakeOpenAI(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		round := strings.Count(string(body), `"role":"tool"`)
		if round >= len(providerRounds) || !strings.Contains(string(body), `"name":"launch_playbook"`) {
			http.Error(w, `{"error":{"message":"unexpected request"}}`, 400)
			return
		}
		step := providerRounds[round]
		chunk := func(delta, finish string) string {
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
		}
		if step.name == "" {
			sse(w, []string{chunk(`{"role":"assistant","content":"`+step.args[:10]+`"}`, ""), chunk(`{"content":"`+step.args[10:]+`"}`, ""),
				chunk(`{}`, "stop"), "data: [DONE]"})
			return
		}
		args := strings.ReplaceAll(step.args, `"`, `\"`)
		half := len(args) / 2
		for args[half-1] == '\\' {
			half++
		}
		sse(w, []string{
			chunk(fmt.Sprintf(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_r%d","type":"function","function":{"name":"%s","arguments":""}}]}`, round, step.name), ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"`+args[:half]+`"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"`+args[half:]+`"}}]}`, ""),
			chunk(`{}`, "tool_calls"), "data: [DONE]"})
	}))
}

func fakeAnthropic(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.HasSuffix(r.URL.Path, "/v1/messages") {
			http.NotFound(w, r)
			return
		}
		round := strings.Count(string(body), `"type":"tool_result"`)
		if round >= len(providerRounds) || !strings.Contains(string(body), `"name":"launch_playbook"`) {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"unexpected request"}}`, 400)
			return
		}
		step := providerRounds[round]
		ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data }
		start := ev("message_start", `{"type":"message_start","message":{"id":"msg","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`)
		stopReason := "tool_use"
		var block []string
		if step.name == "" {
			stopReason = "end_turn"
			block = []string{
				ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+step.args[:10]+`"}}`),
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+step.args[10:]+`"}}`),
			}
		} else {
			args := strings.ReplaceAll(step.args, `"`, `\"`)
			half := len(args) / 2
			for args[half-1] == '\\' {
				half++
			}
			block = []string{
				ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_%d","name":"%s","input":{}}}`, round, step.name)),
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"`+args[:half]+`"}}`),
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"`+args[half:]+`"}}`),
			}
		}
		events := append([]string{start}, block...)
		events = append(events,
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stopReason+`","stop_sequence":null},"usage":{"output_tokens":1}}`),
			ev("message_stop", `{"type":"message_stop"}`))
		sse(w, events)
	}))
}

func TestFullTurnThroughEachProvider(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"openai", "anthropic"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var p model.Provider
			var err error
			switch name {
			case "openai":
				srv := fakeOpenAI(t)
				defer srv.Close()
				p, err = openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
			case "anthropic":
				srv := fakeAnthropic(t)
				defer srv.Close()
				p, err = anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", Model: "m"})
			}
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, harnessOpts{provider: p})
			c := h.conversation()
			acc := h.submit(c.ID, "launch the audit for repo x if something failed")
			var prop protocol.CommandProposal
			h.until(c.ID, 0, func(f protocol.Frame) bool {
				if pp, ok := f.Payload.(protocol.ProposalPayload); ok {
					prop = pp.Proposal
				}
				cp, ok := f.Payload.(protocol.ConfirmationPayload)
				return ok && cp.State == protocol.ConfirmationRequired || f.Type == protocol.FrameDone
			})
			if prop.CommandType != "launch_playbook" {
				t.Fatalf("no proposal: %+v", prop)
			}
			res, err := h.client.Confirm(h.ctx(), c.ID, prop.ID, confirmReq(prop))
			if err != nil || res.Status != "succeeded" {
				t.Fatalf("confirm: %+v %v", res, err)
			}
			frames := h.waitDone(c.ID, acc.RequestID)
			var kinds []string
			var text strings.Builder
			for _, f := range frames {
				k := string(f.Type)
				switch p := f.Payload.(type) {
				case protocol.ToolCallPayload:
					k += ":" + p.Tool + ":" + p.Mode
				case protocol.ToolResultPayload:
					k += fmt.Sprint(":", p.OK)
				case protocol.ConfirmationPayload:
					k += ":" + string(p.State)
				case protocol.TextPayload:
					if p.Role == protocol.RoleAssistant {
						text.WriteString(p.Content)
						continue
					}
				}
				kinds = append(kinds, k)
			}
			want := []string{"text", "tool_call:list_runs:read", "tool_result:true", "tool_call:launch_playbook:draft", "proposal",
				"confirmation:required", "confirmation:confirmed", "confirmation:executed", "tool_result:true", "done"}
			if !slices.Equal(kinds, want) {
				t.Fatalf("frames %v\nwant   %v", kinds, want)
			}
			if text.String() != "All done: the run is queued." {
				t.Fatalf("text %q", text.String())
			}
		})
	}
}
