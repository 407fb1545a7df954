package agui

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
)

func frames(payloads ...protocol.Payload) []protocol.Frame {
	out := make([]protocol.Frame, len(payloads))
	for i, p := range payloads {
		out[i] = protocol.Frame{Version: 1, ConversationID: "c", RequestID: "r", Sequence: int64(i + 1), Type: p.FrameType(), Payload: p}
	}
	return out
}

// mapAll runs frames through a mapper: the events, and the index of the
// frame that ended the run (-1: none did).
func mapAll(m *mapper, fs []protocol.Frame) ([]Event, int) {
	var out []Event
	for i, f := range fs {
		evs, end := m.frame(f)
		out = append(out, evs...)
		if end {
			return out, i
		}
	}
	return out, -1
}

func typesOf(evs []Event) []EventType {
	out := make([]EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

var proposal = protocol.CommandProposal{ID: "p1", CommandType: "launch_playbook", Command: jsontext.Value(`{"playbook":"x"}`),
	CommandHash: "h", Risk: protocol.RiskExecute, Summary: "Launch x", IdempotencyKey: "k", ExpiresAt: 1.7e9,
	Target: &protocol.ResourceVersion{Kind: "playbook", ID: "x", Version: "3"}, Impact: protocol.ImpactDestructive}

// TestEveryFrameTypeMaps: each of the eight frame types becomes its
// events (docs/agui.md's table).
func TestEveryFrameTypeMaps(t *testing.T) {
	effect := protocol.UICommandPayload{EffectID: "e1", Effect: protocol.Effect{Kind: protocol.EffectNavigate, Space: "history", Params: map[string]any{}}}
	cases := []struct {
		name     string
		frontend map[string]bool
		in       []protocol.Payload
		want     []EventType
		ended    int
	}{
		{"text", nil, []protocol.Payload{
			protocol.TextPayload{Content: "do it", Format: "plain", Role: protocol.RoleUser},
			protocol.TextPayload{Content: "a", Format: "markdown"}, protocol.TextPayload{Content: "b", Format: "markdown"},
			protocol.DonePayload{Outcome: protocol.OutcomeCompleted, LastSequence: 4}},
			[]EventType{TextMessageStart, TextMessageContent, TextMessageContent, TextMessageEnd, RunFinished}, 3},
		{"read tool", nil, []protocol.Payload{
			protocol.ToolCallPayload{CallID: "c1", Tool: "list_runs", Arguments: jsontext.Value(`{}`), Mode: "read"},
			protocol.ToolResultPayload{CallID: "c1", OK: true, Result: jsontext.Value(`[]`)}},
			[]EventType{StepStarted, ToolCallStart, ToolCallArgs, ToolCallEnd, ToolCallResult, StepFinished}, -1},
		{"frontend effect", map[string]bool{"navigate": true}, []protocol.Payload{
			protocol.ToolCallPayload{CallID: "c1", Tool: "navigate", Arguments: jsontext.Value(`{}`), Mode: "read"},
			effect, protocol.ToolResultPayload{CallID: "c1", OK: true, Result: jsontext.Value(`{}`)}},
			[]EventType{ToolCallStart, ToolCallArgs, ToolCallEnd}, -1},
		{"effect as text", nil, []protocol.Payload{
			protocol.ToolCallPayload{CallID: "c1", Tool: "navigate", Arguments: jsontext.Value(`{}`), Mode: "read"},
			effect, protocol.ToolResultPayload{CallID: "c1", OK: true, Result: jsontext.Value(`{}`)}},
			[]EventType{ToolCallStart, ToolCallArgs, ToolCallEnd, TextMessageStart, TextMessageContent, TextMessageEnd, ToolCallResult}, -1},
		{"proposal", nil, []protocol.Payload{
			protocol.TextPayload{Content: "I propose", Format: "plain"},
			protocol.ToolCallPayload{CallID: "c1", Tool: "launch_playbook", Arguments: jsontext.Value(`{}`), Mode: "draft"},
			protocol.ProposalPayload{Proposal: proposal},
			protocol.ConfirmationPayload{ProposalID: "p1", State: protocol.ConfirmationRequired}},
			[]EventType{TextMessageStart, TextMessageContent, TextMessageEnd, ToolCallStart, ToolCallArgs, ToolCallEnd, RunFinished}, 3},
		{"confirmation", nil, []protocol.Payload{
			protocol.ConfirmationPayload{ProposalID: "p1", State: protocol.ConfirmationConfirmed, DecidedBy: "bob"},
			protocol.ConfirmationPayload{ProposalID: "p1", State: protocol.ConfirmationExecuted}},
			[]EventType{ActivitySnapshot, ActivitySnapshot}, -1},
		{"error", nil, []protocol.Payload{
			protocol.TextPayload{Content: "x", Format: "plain"},
			protocol.ErrorPayload{Error: *protocol.Errorf(protocol.ModelFailure, "the model failed")},
			protocol.DonePayload{Outcome: protocol.OutcomeFailed, LastSequence: 3}},
			[]EventType{TextMessageStart, TextMessageContent, TextMessageEnd, RunError}, 2},
		{"cancelled", nil, []protocol.Payload{
			protocol.ToolCallPayload{CallID: "c1", Tool: "list_runs", Arguments: jsontext.Value(`{}`), Mode: "read"},
			protocol.DonePayload{Outcome: protocol.OutcomeCancelled, LastSequence: 2}},
			[]EventType{StepStarted, ToolCallStart, ToolCallArgs, ToolCallEnd, StepFinished, RunFinished}, 1},
	}
	for _, c := range cases {
		m := newMapper("t", "r", "c", "http://studio.test", c.frontend)
		evs, ended := mapAll(m, frames(c.in...))
		if !slices.Equal(typesOf(evs), c.want) || ended != c.ended {
			t.Errorf("%s: %v (ended at %d)\n want %v (ended at %d)", c.name, typesOf(evs), ended, c.want, c.ended)
		}
		for _, e := range evs {
			if _, err := json.Marshal(e); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	}
}

// TestRunEnds: the end of a run says how its turn ended: success with
// the frontend tool calls pending, an interrupt with the proposal,
// cancelled, or RUN_ERROR with the turn's typed error.
func TestRunEnds(t *testing.T) {
	m := newMapper("t", "r", "c", "http://studio.test", map[string]bool{"set_theme": true})
	evs, _ := mapAll(m, frames(
		protocol.ToolCallPayload{CallID: "c1", Tool: "set_theme", Arguments: jsontext.Value(`{}`), Mode: "read"},
		protocol.UICommandPayload{EffectID: "e1", Effect: protocol.Effect{Kind: protocol.EffectTheme, Theme: "dark"}},
		protocol.ToolResultPayload{CallID: "c1", OK: true, Result: jsontext.Value(`{}`)},
		protocol.DonePayload{Outcome: protocol.OutcomeCompleted, LastSequence: 4}))
	if o := evs[len(evs)-1].Fields["outcome"].(map[string]any); o["type"] != "success" || !slices.Equal(o["pendingToolCallIds"].([]string), []string{"e1"}) {
		t.Fatalf("outcome %v", o)
	}
	if evs[0].Fields["toolCallName"] != "set_theme" || evs[0].Fields["toolCallId"] != "e1" {
		t.Fatalf("the frontend call %v", evs[0].Fields)
	}

	m = newMapper("t", "r", "c", "http://studio.test", nil)
	evs, _ = mapAll(m, frames(protocol.ProposalPayload{Proposal: proposal}, protocol.ConfirmationPayload{ProposalID: "p1", State: protocol.ConfirmationRequired}))
	o := evs[len(evs)-1].Fields["outcome"].(map[string]any)
	it := o["interrupts"].([]Interrupt)[0]
	meta := it.Metadata
	if o["type"] != "interrupt" || it.ID != "p1" || it.Message != "Launch x" || it.ExpiresAt != "2023-11-14T22:13:20Z" || meta["risk"] != protocol.RiskExecute ||
		meta["impact"] != protocol.ImpactDestructive || meta["commandHash"] != "h" || meta["target"].(map[string]any)["version"] != "3" ||
		meta["cockpitUrl"] != "http://studio.test/#conversation=c&proposal=p1" {
		t.Fatalf("interrupt %+v", it)
	}

	m = newMapper("t", "r", "c", "", nil)
	evs, _ = mapAll(m, frames(protocol.ErrorPayload{Error: *protocol.Errorf(protocol.ModelFailure, "down")},
		protocol.DonePayload{Outcome: protocol.OutcomeFailed, LastSequence: 2}))
	if e := evs[len(evs)-1]; e.Type != RunError || e.Fields["code"] != "model_failure" || e.Fields["message"] != "down" {
		t.Fatalf("run error %v", e.Fields)
	}
	m = newMapper("t", "r", "c", "", nil)
	evs, _ = mapAll(m, frames(protocol.DonePayload{Outcome: protocol.OutcomeCancelled, LastSequence: 1}))
	if o := evs[0].Fields["outcome"].(map[string]any); o["type"] != "cancelled" {
		t.Fatalf("cancelled %v", o)
	}
}

// TestReopen: a run written from a cursor inside a message or a step
// starts them again first.
func TestReopen(t *testing.T) {
	m := newMapper("t", "r", "c", "", nil)
	mapAll(m, frames(protocol.ToolCallPayload{CallID: "c1", Tool: "list_runs", Arguments: jsontext.Value(`{}`), Mode: "read"}))
	if got := typesOf(m.reopen()); !slices.Equal(got, []EventType{StepStarted}) {
		t.Fatalf("reopen in a step: %v", got)
	}
	m = newMapper("t", "r", "c", "", nil)
	mapAll(m, frames(protocol.TextPayload{Content: "a", Format: "plain"}))
	if got := m.reopen(); len(got) != 1 || got[0].Type != TextMessageStart || got[0].Fields["messageId"] != "msg-1" {
		t.Fatalf("reopen in a message: %v", got)
	}
}
