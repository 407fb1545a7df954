package protocol_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

// Real request bodies, as the dock and the Go client send them. They seed the
// fuzzers too.
const (
	turnBody = `{"instruction":"show failed runs","context":{"project":"studio","space":"mission","route":"/?view=fleet",` +
		`"selection":{"runId":"r-1"},"filters":{"status":"failed","limit":20}},"expectedLastSequence":4}`
	turnBodySnake = `{"instruction":"dark mode","context":{"space":"system","route":"/system"},"expected_last_sequence":0}`
	ackBody       = `{"status":"applied","clientRoute":"/history?status=failed"}`
	ackBodySnake  = `{"status":"rejected","rejection_code":"not_visible","detail":"panel closed"}`
	confirmBody   = `{"expectedCommandHash":"6a1f0e","expectedTargetVersion":"7"}`
	confirmSnake  = `{"expected_command_hash":"6a1f0e","expected_target_version":"7"}`
	ticketBody    = `{"conversationId":"0f8fad5b-d9cb-469f-a165-70867728950e","afterSequence":12}`
	createBody    = `{"project":"studio","title":"Nightly failures"}`
	updateBody    = `{"title":"Renamed","status":"archived"}`
)

func decodeErr(t *testing.T, body string, v any) *protocol.Error {
	t.Helper()
	err := protocol.DecodeRequest([]byte(body), v)
	if err == nil {
		t.Fatalf("DecodeRequest(%s) succeeded: %+v", body, v)
	}
	pe, ok := err.(*protocol.Error)
	if !ok {
		t.Fatalf("DecodeRequest(%s) = %T %v, want *protocol.Error", body, err, err)
	}
	return pe
}

func TestDecodeRequestValid(t *testing.T) {
	t.Parallel()
	var tr protocol.TurnRequest
	if err := protocol.DecodeRequest([]byte(turnBody), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Instruction != "show failed runs" || *tr.ExpectedLastSequence != 4 || *tr.Context.Project != "studio" ||
		tr.Context.Space != "mission" || tr.Context.Selection["runId"] != "r-1" || tr.Context.Filters["limit"] != float64(20) {
		t.Fatalf("decoded %+v", tr)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	// An optional top-level version 1 is accepted and dropped.
	var v protocol.TurnRequest
	if err := protocol.DecodeRequest([]byte(`{"version":1,`+turnBody[1:]), &v); err != nil || !reflect.DeepEqual(v, tr) {
		t.Fatalf("with version 1: %+v, %v", v, err)
	}
}

func TestDecodeRequestStrict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body string
		code protocol.ErrorCode
	}{
		{"unknown field", `{"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0,"priority":1}`, protocol.Validation},
		{"unknown nested field", `{"instruction":"x","context":{"space":"mission","route":"/","zoom":2},"expectedLastSequence":0}`, protocol.Validation},
		{"wrong case", `{"Instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0}`, protocol.Validation},
		{"duplicate key", `{"instruction":"x","instruction":"y","context":{"space":"mission","route":"/"},"expectedLastSequence":0}`, protocol.Validation},
		{"duplicate nested key", `{"instruction":"x","context":{"space":"mission","space":"system","route":"/"},"expectedLastSequence":0}`, protocol.Validation},
		{"duplicate in filters", `{"instruction":"x","context":{"space":"mission","route":"/","filters":{"a":1,"a":2}},"expectedLastSequence":0}`, protocol.Validation},
		{"wrong type string", `{"instruction":5,"context":{"space":"mission","route":"/"},"expectedLastSequence":0}`, protocol.Validation},
		{"wrong type number", `{"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":"0"}`, protocol.Validation},
		{"fractional sequence", `{"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":1.5}`, protocol.Validation},
		{"wrong type object", `{"instruction":"x","context":"mission","expectedLastSequence":0}`, protocol.Validation},
		{"trailing data", turnBody + `{}`, protocol.Validation},
		{"trailing garbage", turnBody + ` x`, protocol.Validation},
		{"two objects", turnBody + turnBody, protocol.Validation},
		{"not an object", `["instruction"]`, protocol.Validation},
		{"empty", ``, protocol.Validation},
		{"truncated", `{"instruction":"x"`, protocol.Validation},
		{"invalid utf-8", "{\"instruction\":\"\xff\"}", protocol.Validation},
		{"version 2", `{"version":2,"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0}`, protocol.ProtocolVersion},
		{"version 2 with unknown fields", `{"version":2,"instruction":"x","novel":true}`, protocol.ProtocolVersion},
		{"version 0", `{"version":0}`, protocol.ProtocolVersion},
		{"version string", `{"version":"1"}`, protocol.ProtocolVersion},
		{"duplicate version", `{"version":1,"version":1,"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0}`, protocol.Validation},
	} {
		var tr protocol.TurnRequest
		if pe := decodeErr(t, tc.body, &tr); pe.Code != tc.code {
			t.Errorf("%s: code %s (%v), want %s", tc.name, pe.Code, pe, tc.code)
		}
	}
}

func TestDecodeRequestAliases(t *testing.T) {
	t.Parallel()
	// Each of the five listed fields, in both spellings, decodes the same.
	pairs := []struct {
		camel, snake string
		into         func() any
	}{
		{turnBody, strings.Replace(turnBody, "expectedLastSequence", "expected_last_sequence", 1), func() any { return new(protocol.TurnRequest) }},
		{confirmBody, confirmSnake, func() any { return new(protocol.ConfirmProposalRequest) }},
		{`{"status":"applied","clientRoute":"/"}`, `{"status":"applied","client_route":"/"}`, func() any { return new(protocol.AckEffectRequest) }},
		{`{"status":"rejected","rejectionCode":"unsupported"}`, `{"status":"rejected","rejection_code":"unsupported"}`, func() any { return new(protocol.AckEffectRequest) }},
	}
	for _, p := range pairs {
		a, b := p.into(), p.into()
		if err := protocol.DecodeRequest([]byte(p.camel), a); err != nil {
			t.Fatalf("%s: %v", p.camel, err)
		}
		if err := protocol.DecodeRequest([]byte(p.snake), b); err != nil {
			t.Fatalf("%s: %v", p.snake, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("camel %+v != snake %+v", a, b)
		}
	}

	// Both spellings of one field are a duplicate, in either order.
	for _, tc := range []struct {
		body string
		into any
	}{
		{`{"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0,"expected_last_sequence":0}`, new(protocol.TurnRequest)},
		{`{"instruction":"x","context":{"space":"mission","route":"/"},"expected_last_sequence":0,"expectedLastSequence":0}`, new(protocol.TurnRequest)},
		{`{"expectedCommandHash":"a","expected_command_hash":"a"}`, new(protocol.ConfirmProposalRequest)},
		{`{"expectedCommandHash":"a","expectedTargetVersion":"1","expected_target_version":"1"}`, new(protocol.ConfirmProposalRequest)},
		{`{"status":"applied","client_route":"/","clientRoute":"/"}`, new(protocol.AckEffectRequest)},
		{`{"status":"rejected","rejectionCode":"unsupported","rejection_code":"unsupported"}`, new(protocol.AckEffectRequest)},
	} {
		if pe := decodeErr(t, tc.body, tc.into); pe.Code != protocol.Validation {
			t.Errorf("%s: code %s, want validation", tc.body, pe.Code)
		}
	}

	// Nothing but the five is renamed: other snake_case spellings, including
	// those of fields that exist in camelCase, are unknown members.
	for _, tc := range []struct {
		body string
		into any
	}{
		{`{"conversation_id":"c","afterSequence":0}`, new(protocol.StreamTicketRequest)},
		{`{"conversationId":"c","after_sequence":0}`, new(protocol.StreamTicketRequest)},
		{`{"status":"applied","effect_id":"e"}`, new(protocol.AckEffectRequest)},
		{`{"instruction":"x","context":{"space":"mission","route":"/"},"expected_last_seq":0}`, new(protocol.TurnRequest)},
		// Aliases apply to the top level of the body only.
		{`{"instruction":"x","context":{"space":"mission","route":"/","client_route":"/"},"expectedLastSequence":0}`, new(protocol.TurnRequest)},
		// An alias of another request's field is unknown here.
		{`{"expectedCommandHash":"a","client_route":"/"}`, new(protocol.ConfirmProposalRequest)},
	} {
		if pe := decodeErr(t, tc.body, tc.into); pe.Code != protocol.Validation {
			t.Errorf("%s: code %s, want validation", tc.body, pe.Code)
		}
	}
}

func TestTurnRequestValidate(t *testing.T) {
	t.Parallel()
	seq := int64(0)
	neg := int64(-1)
	ok := protocol.TurnRequest{Instruction: "x", Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &seq}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", protocol.MaxInstructionChars)
	for name, mutate := range map[string]func(*protocol.TurnRequest){
		"empty instruction":   func(r *protocol.TurnRequest) { r.Instruction = "" },
		"blank instruction":   func(r *protocol.TurnRequest) { r.Instruction = " \n\t" },
		"too long":            func(r *protocol.TurnRequest) { r.Instruction = long + "x" },
		"no sequence":         func(r *protocol.TurnRequest) { r.ExpectedLastSequence = nil },
		"negative sequence":   func(r *protocol.TurnRequest) { r.ExpectedLastSequence = &neg },
		"unknown space":       func(r *protocol.TurnRequest) { r.Context.Space = "fleet" },
		"no route":            func(r *protocol.TurnRequest) { r.Context.Route = "" },
		"route over 2 KiB":    func(r *protocol.TurnRequest) { r.Context.Route = "/" + strings.Repeat("a", 2048) },
		"space of other case": func(r *protocol.TurnRequest) { r.Context.Space = "Mission" },
	} {
		r := ok
		mutate(&r)
		if err := r.Validate(); !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("%s: Validate = %v, want validation", name, err)
		}
	}
	// The cap counts characters, not bytes.
	r := ok
	r.Instruction = long
	if err := r.Validate(); err != nil {
		t.Fatalf("%d two-byte characters: %v", protocol.MaxInstructionChars, err)
	}
}
