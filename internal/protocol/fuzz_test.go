package protocol_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

// The fuzz property for every decoder: it never panics, every failure is a
// *protocol.Error, and whatever decodes re-encodes to bytes that decode again
// to a value with the very same encoding and equal to itself after one more
// round. (Equality is taken on the encoding rather than the first decoded
// value because the first decode keeps the sender's spelling of raw JSON and
// may hold an empty map where the encoding omits the member; both are the
// same value on the wire.)

func wantProtocolError(t *testing.T, err error, allowed ...protocol.ErrorCode) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *protocol.Error", err, err)
	}
	for _, c := range allowed {
		if pe.Code == c {
			return
		}
	}
	t.Fatalf("error code %s, want one of %v", pe.Code, allowed)
}

func FuzzDecodeFrame(f *testing.F) {
	for i, p := range samplePayloads() {
		b, err := protocol.EncodeFrame(frame(int64(i+1), p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version":2,"conversationId":"c","requestId":"r","sequence":1,"type":"text","payload":{},"createdAt":0}`))
	f.Add([]byte(`{"version":1,"conversationId":"c","requestId":"r","sequence":1,"type":"ui_command","payload":{"effectId":"e","effect":{"kind":"navigate","space":"mission","params":{"a":[]}},"expiresAt":0},"createdAt":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := protocol.DecodeFrame(data)
		if err != nil {
			wantProtocolError(t, err, protocol.Validation, protocol.ProtocolVersion)
			return
		}
		b1, err := protocol.EncodeFrame(fr)
		if err != nil {
			t.Fatalf("decoded frame %#v does not encode: %v", fr, err)
		}
		fr2, err := protocol.DecodeFrame(b1)
		if err != nil {
			t.Fatalf("re-encoded frame %s does not decode: %v", b1, err)
		}
		b2, err := protocol.EncodeFrame(fr2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("encoding not stable:\n%s\n%s (%v)", b1, b2, err)
		}
		fr3, err := protocol.DecodeFrame(b2)
		if err != nil || !reflect.DeepEqual(fr2, fr3) {
			t.Fatalf("decode not stable: %#v\n%#v (%v)", fr2, fr3, err)
		}
		if fr.Sequence != fr2.Sequence || fr.Type != fr2.Type || fr.ConversationID != fr2.ConversationID ||
			fr.RequestID != fr2.RequestID || fr.CreatedAt != fr2.CreatedAt {
			t.Fatalf("envelope changed: %#v -> %#v", fr, fr2)
		}
	})
}

func FuzzDecodeTurnRequest(f *testing.F) {
	for _, s := range []string{turnBody, turnBodySnake,
		`{"version":1,"instruction":"launch audit on repo x","context":{"space":"library","route":"/library","filters":{}},"expectedLastSequence":12}`,
		`{"instruction":"what failed today?","context":{"project":null,"space":"history","route":"/history","selection":null},"expected_last_sequence":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r protocol.TurnRequest
		if err := protocol.DecodeRequest(data, &r); err != nil {
			wantProtocolError(t, err, protocol.Validation, protocol.ProtocolVersion)
			return
		}
		if err := r.Validate(); err != nil {
			wantProtocolError(t, err, protocol.Validation)
		}
		roundTrip(t, &r, func() any { return new(protocol.TurnRequest) })
	})
}

// FuzzDecodeRequestAliases decodes one body as every request type with
// snake_case aliases, and checks that a body written with the aliases
// decodes like its camelCase spelling.
func FuzzDecodeRequestAliases(f *testing.F) {
	for _, s := range []string{ackBody, ackBodySnake, confirmBody, confirmSnake, ticketBody, createBody, updateBody, turnBodySnake,
		`{"status":"applied","client_route":"/","clientRoute":"/"}`,
		`{"expected_command_hash":"a","expectedCommandHash":"a"}`,
		`{"conversation_id":"c","after_sequence":1}`,
	} {
		f.Add([]byte(s))
	}
	targets := []func() any{
		func() any { return new(protocol.AckEffectRequest) },
		func() any { return new(protocol.ConfirmProposalRequest) },
		func() any { return new(protocol.StreamTicketRequest) },
		func() any { return new(protocol.CreateConversationRequest) },
		func() any { return new(protocol.UpdateConversationRequest) },
		func() any { return new(protocol.TurnRequest) },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newV := range targets {
			v := newV()
			if err := protocol.DecodeRequest(data, v); err != nil {
				wantProtocolError(t, err, protocol.Validation, protocol.ProtocolVersion)
				continue
			}
			roundTrip(t, v, newV)
		}
	})
}

// roundTrip re-encodes a decoded request (camelCase, as the Go client sends
// it) and checks the property above.
func roundTrip(t *testing.T, v any, newV func() any) {
	t.Helper()
	b1, err := protocol.Marshal(v)
	if err != nil {
		t.Fatalf("decoded %#v does not encode: %v", v, err)
	}
	v2 := newV()
	if err := protocol.DecodeRequest(b1, v2); err != nil {
		t.Fatalf("re-encoded %s does not decode: %v", b1, err)
	}
	b2, err := protocol.Marshal(v2)
	if err != nil || !bytes.Equal(b1, b2) {
		t.Fatalf("encoding not stable:\n%s\n%s (%v)", b1, b2, err)
	}
	v3 := newV()
	if err := protocol.DecodeRequest(b2, v3); err != nil || !reflect.DeepEqual(v2, v3) {
		t.Fatalf("decode not stable: %#v\n%#v (%v)", v2, v3, err)
	}
}
