package protocol_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
)

const (
	convID = "0f8fad5b-d9cb-469f-a165-70867728950e"
	reqID  = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
)

func frame(seq int64, p protocol.Payload) protocol.Frame {
	return protocol.Frame{Version: 1, ConversationID: convID, RequestID: reqID, Sequence: seq,
		Type: p.FrameType(), Payload: p, CreatedAt: 1783598400.123456}
}

// samplePayloads holds one or more payloads of each of the eight types, in
// the decoded form (numbers inside free JSON are float64, raw JSON compact).
func samplePayloads() []protocol.Payload {
	return []protocol.Payload{
		protocol.TextPayload{Content: "show failed runs", Format: "plain", Role: protocol.RoleUser},
		protocol.TextPayload{Content: "Three runs **failed**.\n", Format: "markdown", Role: protocol.RoleAssistant},
		protocol.TextPayload{Content: "", Format: "plain"},
		protocol.ToolCallPayload{CallID: "call-1", Tool: "runs.list", Arguments: jsontext.Value(`{"limit":20,"status":"failed"}`), Mode: "read"},
		protocol.ToolCallPayload{CallID: "call-2", Tool: "schedules.draft", Arguments: jsontext.Value(`{}`), Mode: "draft"},
		protocol.ToolResultPayload{CallID: "call-1", OK: true, Result: jsontext.Value(`{"runs":[{"id":"r-1","status":"failed"}]}`)},
		protocol.ToolResultPayload{CallID: "call-1", OK: true, Result: jsontext.Value(`[]`)},
		protocol.ToolResultPayload{CallID: "call-1", OK: true, Result: jsontext.Value(`{}`)},
		protocol.ToolResultPayload{CallID: "call-1", OK: true, Result: jsontext.Value(`0`)},
		protocol.ToolResultPayload{CallID: "call-1", OK: true},
		protocol.ToolResultPayload{CallID: "call-3", OK: false, Error: &protocol.Error{Code: protocol.NotFound, Message: "run r-9 not found",
			Details: map[string]any{"id": "r-9"}}},
		protocol.UICommandPayload{EffectID: "e-1", ExpiresAt: 1783599000.5, Effect: protocol.Effect{Kind: protocol.EffectNavigate, Space: "mission",
			Params: map[string]any{"view": "fleet", "page": float64(2), "live": true, "tags": []any{"a", "b"}}}},
		protocol.UICommandPayload{EffectID: "e-2", ExpiresAt: 1, Effect: protocol.Effect{Kind: protocol.EffectNavigate, Space: "system", Params: map[string]any{}}},
		protocol.UICommandPayload{EffectID: "e-3", ExpiresAt: 1, Effect: protocol.Effect{Kind: protocol.EffectSelect, Space: "history", Selection: map[string]string{"runId": "r-1"}}},
		protocol.UICommandPayload{EffectID: "e-4", ExpiresAt: 1, Effect: protocol.Effect{Kind: protocol.EffectPrefill, Form: "schedule",
			Values: map[string]any{"name": "nightly", "cron": "0 3 * * *", "enabled": true, "args": map[string]any{"repo": "x"}}}},
		protocol.UICommandPayload{EffectID: "e-5", ExpiresAt: 1, Effect: protocol.Effect{Kind: protocol.EffectTheme, Theme: "dark"}},
		protocol.ProposalPayload{Proposal: protocol.CommandProposal{ID: "p-1", CommandType: "launch_playbook",
			Command: jsontext.Value(`{"input":{"repo":"x"},"playbook":"audit"}`), CommandHash: strings.Repeat("ab", 32), Risk: protocol.RiskExecute,
			Summary: "Launch audit on repo x", Target: &protocol.ResourceVersion{Kind: "playbook", ID: "audit", Version: "3"},
			IdempotencyKey: "k-1", ExpiresAt: 1783599000}},
		protocol.ProposalPayload{Proposal: protocol.CommandProposal{ID: "p-2", CommandType: "run_maintenance", Command: jsontext.Value(`{"task":"vacuum"}`),
			CommandHash: "00", Risk: protocol.RiskAdmin, Summary: "Vacuum", IdempotencyKey: "k-2", ExpiresAt: 2}},
		protocol.ProposalPayload{Proposal: protocol.CommandProposal{ID: "p-3", CommandType: "delete_schedule", Command: jsontext.Value(`{"schedule":"s-1"}`),
			CommandHash: "01", Risk: protocol.RiskMutate, Summary: `Delete schedule "nightly"`, IdempotencyKey: "k-3", ExpiresAt: 3,
			Origin: protocol.ProposalOriginRequest}},
		protocol.ConfirmationPayload{ProposalID: "p-1", State: protocol.ConfirmationRequired},
		protocol.ConfirmationPayload{ProposalID: "p-1", State: protocol.ConfirmationDenied},
		protocol.ErrorPayload{Error: protocol.Error{Code: protocol.RateLimited, Message: "slow down", Retryable: true, RetryAfterMs: 1500}},
		protocol.ErrorPayload{Error: protocol.Error{Code: protocol.ServiceRestarted, Message: "restarted", Retryable: true,
			Details: map[string]any{"requestId": reqID, "attempt": float64(1)}}},
		protocol.DonePayload{Outcome: protocol.OutcomeCompleted, LastSequence: 9},
		protocol.DonePayload{Outcome: protocol.OutcomeCancelled, LastSequence: 1},
	}
}

func TestFrameRoundTrip(t *testing.T) {
	t.Parallel()
	types := map[protocol.FrameType]bool{}
	for i, p := range samplePayloads() {
		f := frame(int64(i+1), p)
		b, err := protocol.EncodeFrame(f)
		if err != nil {
			t.Fatalf("%s: EncodeFrame: %v", p.FrameType(), err)
		}
		got, err := protocol.DecodeFrame(b)
		if err != nil {
			t.Fatalf("%s: DecodeFrame(%s): %v", p.FrameType(), b, err)
		}
		if !reflect.DeepEqual(got, f) {
			t.Fatalf("%s: round trip\n got %#v\nwant %#v\nwire %s", p.FrameType(), got, f, b)
		}
		// The payload alone too, as the store keeps it.
		raw, err := protocol.EncodePayload(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := protocol.DecodePayload(p.FrameType(), raw)
		if err != nil || !reflect.DeepEqual(back, p) {
			t.Fatalf("%s: payload round trip = %#v, %v", p.FrameType(), back, err)
		}
		types[p.FrameType()] = true
	}
	if len(types) != 8 {
		t.Fatalf("round-tripped %d frame types, want all 8", len(types))
	}
	for _, ft := range []protocol.FrameType{protocol.FrameText, protocol.FrameToolCall, protocol.FrameToolResult, protocol.FrameUICommand,
		protocol.FrameProposal, protocol.FrameConfirmation, protocol.FrameError, protocol.FrameDone} {
		if !protocol.ValidFrameType(ft) || !types[ft] {
			t.Fatalf("frame type %s not covered", ft)
		}
	}
}

// TestFrameWire pins the envelope's camelCase member names and the payload
// shapes of docs/protocol.md §3 and docs/design.md §4.
func TestFrameWire(t *testing.T) {
	t.Parallel()
	b, err := protocol.EncodeFrame(frame(3, protocol.DonePayload{Outcome: "completed", LastSequence: 3}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"conversationId":"` + convID + `","requestId":"` + reqID +
		`","sequence":3,"type":"done","payload":{"outcome":"completed","lastSequence":3},"createdAt":1783598400.123456}`
	if string(b) != want {
		t.Fatalf("wire = %s\nwant %s", b, want)
	}
	b, err = protocol.EncodePayload(protocol.UICommandPayload{EffectID: "e", ExpiresAt: 2,
		Effect: protocol.Effect{Kind: "select", Space: "library", Selection: map[string]string{"playbookId": "p"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"effectId":"e","effect":{"kind":"select","space":"library","selection":{"playbookId":"p"}},"expiresAt":2}`; string(b) != want {
		t.Fatalf("ui_command = %s\nwant %s", b, want)
	}
	// A direct request's proposal says so; one stored before origin was kept has none.
	for origin, want := range map[string]string{protocol.ProposalOriginRequest: `,"origin":"request"}`, "": `,"expiresAt":1}`} {
		b, err = protocol.EncodePayload(protocol.ProposalPayload{Proposal: protocol.CommandProposal{ID: "p", CommandType: "x", Command: jsontext.Value(`{}`),
			CommandHash: "h", IdempotencyKey: "k", Risk: protocol.RiskMutate, ExpiresAt: 1, Origin: origin}})
		if err != nil || !strings.HasSuffix(string(b), want+"}") {
			t.Fatalf("proposal of origin %q = %s (%v), want it to end %s}", origin, b, err, want)
		}
	}
}

func TestDecodeFrameStrict(t *testing.T) {
	t.Parallel()
	valid := `{"version":1,"conversationId":"c","requestId":"r","sequence":1,"type":"text","payload":{"content":"x","format":"plain"},"createdAt":1.5}`
	if _, err := protocol.DecodeFrame([]byte(valid)); err != nil {
		t.Fatal(err)
	}
	with := func(old, new string) string { return strings.Replace(valid, old, new, 1) }
	for _, tc := range []struct {
		name string
		in   string
		code protocol.ErrorCode
	}{
		{"unknown envelope member", with(`"createdAt"`, `"extra":1,"createdAt"`), protocol.Validation},
		{"unknown payload member", with(`"format":"plain"`, `"format":"plain","bold":true`), protocol.Validation},
		{"snake_case envelope", with(`"conversationId"`, `"conversation_id"`), protocol.Validation},
		{"duplicate envelope key", with(`"sequence":1`, `"sequence":1,"sequence":2`), protocol.Validation},
		{"duplicate payload key", with(`"content":"x"`, `"content":"x","content":"y"`), protocol.Validation},
		{"wrong type sequence", with(`"sequence":1`, `"sequence":"1"`), protocol.Validation},
		{"wrong type payload", with(`{"content":"x","format":"plain"}`, `"x"`), protocol.Validation},
		{"wrong type content", with(`"content":"x"`, `"content":1`), protocol.Validation},
		{"trailing data", valid + `{}`, protocol.Validation},
		{"trailing garbage", valid + `x`, protocol.Validation},
		{"unknown frame type", with(`"type":"text"`, `"type":"thought"`), protocol.Validation},
		{"type and payload disagree", with(`"type":"text"`, `"type":"done"`), protocol.Validation},
		{"no payload", with(`,"payload":{"content":"x","format":"plain"}`, ``), protocol.Validation},
		{"null payload", with(`{"content":"x","format":"plain"}`, `null`), protocol.Validation},
		{"sequence zero", with(`"sequence":1`, `"sequence":0`), protocol.Validation},
		{"bad format", with(`"plain"`, `"html"`), protocol.Validation},
		{"bad role", with(`"format":"plain"`, `"format":"plain","role":"system"`), protocol.Validation},
		{"version 2", with(`"version":1`, `"version":2`), protocol.ProtocolVersion},
		{"version 2, unknown type", with(`"version":1`, `"version":2`), protocol.ProtocolVersion},
		{"version 2, new members", with(`"version":1`, `"version":2,"trace":{}`), protocol.ProtocolVersion},
		{"version 0", with(`"version":1`, `"version":0`), protocol.ProtocolVersion},
		{"no version", with(`"version":1,`, ``), protocol.ProtocolVersion},
		{"not an object", `[]`, protocol.Validation},
		{"empty", ``, protocol.Validation},
	} {
		_, err := protocol.DecodeFrame([]byte(tc.in))
		if !protocol.IsCode(err, tc.code) {
			t.Errorf("%s: DecodeFrame = %v, want %s", tc.name, err, tc.code)
		}
	}
	// Payload members of other types are unknown members.
	for _, tc := range []struct {
		t    protocol.FrameType
		body string
	}{
		{protocol.FrameDone, `{"outcome":"completed","lastSequence":1,"content":"x"}`},
		{protocol.FrameConfirmation, `{"proposalId":"p","state":"required","proposal":{}}`},
		{protocol.FrameToolCall, `{"callId":"c","tool":"t","arguments":{},"mode":"read","ok":true}`},
		{protocol.FrameError, `{"error":{"code":"validation","message":"m","retryable":false,"hint":"x"}}`},
		{protocol.FrameUICommand, `{"effectId":"e","effect":{"kind":"theme","theme":"dark"},"expiresAt":1,"applied":true}`},
	} {
		if _, err := protocol.DecodePayload(tc.t, []byte(tc.body)); !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("%s %s: %v, want validation", tc.t, tc.body, err)
		}
	}
}

func TestPayloadValidation(t *testing.T) {
	t.Parallel()
	for _, p := range []protocol.Payload{
		protocol.ToolCallPayload{Tool: "t", Arguments: jsontext.Value(`{}`), Mode: "read"},
		protocol.ToolCallPayload{CallID: "c", Tool: "t", Arguments: jsontext.Value(`{}`), Mode: "mutate"},
		protocol.ToolCallPayload{CallID: "c", Tool: "t", Arguments: jsontext.Value(`[1]`), Mode: "read"},
		protocol.ToolResultPayload{CallID: "c", OK: false},
		protocol.ToolResultPayload{CallID: "c", OK: false, Error: &protocol.Error{Code: "nope"}},
		protocol.UICommandPayload{Effect: protocol.Effect{Kind: "theme", Theme: "dark"}},
		protocol.ProposalPayload{Proposal: protocol.CommandProposal{ID: "p", CommandType: "x", Command: jsontext.Value(`{}`), CommandHash: "h", IdempotencyKey: "k", Risk: "read"}},
		protocol.ProposalPayload{Proposal: protocol.CommandProposal{ID: "p", CommandType: "x", Command: jsontext.Value(`"x"`), CommandHash: "h", IdempotencyKey: "k", Risk: "mutate"}},
		protocol.ProposalPayload{Proposal: protocol.CommandProposal{ID: "p", CommandType: "x", Command: jsontext.Value(`{}`), CommandHash: "h", IdempotencyKey: "k", Risk: "mutate", Origin: "model"}},
		protocol.ConfirmationPayload{ProposalID: "p", State: "maybe"},
		protocol.ConfirmationPayload{State: "required"},
		protocol.ErrorPayload{Error: protocol.Error{Code: "teapot"}},
		protocol.DonePayload{Outcome: "completed"},
		protocol.DonePayload{Outcome: "paused", LastSequence: 1},
	} {
		if _, err := protocol.EncodePayload(p); !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("EncodePayload(%#v) = %v, want validation", p, err)
		}
		if _, err := protocol.EncodeFrame(frame(1, p)); !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("EncodeFrame(%#v) = %v, want validation", p, err)
		}
	}
	// Envelope checks.
	ok := frame(1, protocol.DonePayload{Outcome: "completed", LastSequence: 1})
	for name, f := range map[string]protocol.Frame{
		"version":     func() protocol.Frame { f := ok; f.Version = 2; return f }(),
		"no payload":  func() protocol.Frame { f := ok; f.Payload = nil; return f }(),
		"mismatch":    func() protocol.Frame { f := ok; f.Type = protocol.FrameText; return f }(),
		"sequence 0":  func() protocol.Frame { f := ok; f.Sequence = 0; return f }(),
		"pointer ok?": ok,
	} {
		_, err := protocol.EncodeFrame(f)
		switch name {
		case "pointer ok?":
			if err != nil {
				t.Errorf("valid frame refused: %v", err)
			}
		case "version":
			if !protocol.IsCode(err, protocol.ProtocolVersion) {
				t.Errorf("%s: %v, want protocol_version", name, err)
			}
		default:
			if !protocol.IsCode(err, protocol.Validation) {
				t.Errorf("%s: %v, want validation", name, err)
			}
		}
	}
}

func TestTimestamp(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 7, 9, 12, 0, 0, 123456789, time.UTC)
	ts := protocol.Timestamp(at)
	if ts != float64(at.Unix())+0.123456 {
		t.Fatalf("Timestamp = %v, want whole microseconds", ts)
	}
	back := protocol.Time(ts)
	if !back.Equal(at.Truncate(time.Microsecond)) || back.Location() != time.UTC {
		t.Fatalf("Time(%v) = %v", ts, back)
	}
	if protocol.Timestamp(back) != ts {
		t.Fatal("Timestamp(Time(ts)) != ts")
	}
}
