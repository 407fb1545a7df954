package protocol_test

import (
	"bytes"
	"math"
	"strconv"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
)

// marshalSSE is the event as Marshal writes the envelope: the bytes
// AppendSSE must keep writing, whatever it does to be faster.
func marshalSSE(f protocol.RawFrame) ([]byte, error) {
	b, err := protocol.Marshal(f)
	if err != nil {
		return nil, err
	}
	out := append([]byte("id: "), strconv.FormatInt(f.Sequence, 10)...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...), nil
}

// checkSSE fails unless AppendSSE writes Marshal's bytes for f, or fails
// where Marshal fails, leaving dst as it was.
func checkSSE(t *testing.T, f protocol.RawFrame) {
	t.Helper()
	want, werr := marshalSSE(f)
	prefix := []byte("before")
	got, err := protocol.AppendSSE(prefix, f)
	if (err != nil) != (werr != nil) {
		t.Fatalf("frame %+v: AppendSSE error %v, Marshal error %v", f, err, werr)
	}
	if err != nil {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("a failed AppendSSE left %q", got)
		}
		return
	}
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("AppendSSE wrote\n%q\nMarshal's event is\n%q", got[len(prefix):], want)
	}
}

func TestAppendSSEWritesMarshalsBytes(t *testing.T) {
	t.Parallel()
	base := protocol.RawFrame{Version: protocol.Version, ConversationID: "c-1", RequestID: "r-1", Sequence: 42,
		Type: protocol.FrameText, CreatedAt: 1764662400.123456}
	for i, p := range samplePayloads() {
		raw, err := protocol.EncodePayload(p)
		if err != nil {
			t.Fatal(err)
		}
		f := base
		f.Sequence, f.Type, f.Payload = int64(i+1), p.FrameType(), raw
		checkSSE(t, f)
	}
	for _, payload := range []string{
		` { "a" : 1 , "b" : [ 1 , 2 ] } `, // whitespace: compacted
		`{"a":"\u0041\/"}`,                // escapes Marshal spells otherwise
		`{"x":"<&>\u2028"}`,               // left unescaped
		`[1.0E+2,-0,1e400]`,               // numbers kept as written
		`{"a":1,"a":2}`,                   // a duplicate name: refused
		"{\"a\":\"\xff\"}",                // invalid UTF-8: refused
		`{"a":`,                           // truncated: refused
		``,                                // empty: refused
		`null`, `"s"`, `{}`,
	} {
		f := base
		f.Payload = jsontext.Value(payload)
		checkSSE(t, f)
	}
	for _, f := range []protocol.RawFrame{
		{ConversationID: "quote\"back\\slash\ttab<>&\u2028é", RequestID: "", Type: "x\n", Payload: jsontext.Value(`{}`)},
		{ConversationID: "bad\xffutf8", Payload: jsontext.Value(`{}`)},
		{RequestID: "bad\xff", Payload: jsontext.Value(`{}`)},
		{Type: "bad\xff", Payload: jsontext.Value(`{}`)},
		{Sequence: math.MaxInt64, Version: -1, Payload: jsontext.Value(`{}`), CreatedAt: 1e21},
		{Payload: jsontext.Value(`{}`), CreatedAt: 1e-7},
		{Payload: jsontext.Value(`{}`), CreatedAt: math.NaN()},
		{Payload: jsontext.Value(`{}`), CreatedAt: math.Inf(-1)},
	} {
		checkSSE(t, f)
	}
}

func FuzzAppendSSE(f *testing.F) {
	f.Add("c", "r", int64(1), "text", []byte(`{"content":"x"}`), 1.5)
	f.Add("c\"", "r\xff", int64(-1), "", []byte(` [ 1 , "\u0041" ] `), math.Copysign(0, -1))
	f.Fuzz(func(t *testing.T, conv, req string, seq int64, typ string, payload []byte, created float64) {
		checkSSE(t, protocol.RawFrame{Version: protocol.Version, ConversationID: conv, RequestID: req, Sequence: seq,
			Type: protocol.FrameType(typ), Payload: payload, CreatedAt: created})
	})
}

// BenchmarkAppendSSE encodes one ordinary text frame as a stream event.
func BenchmarkAppendSSE(b *testing.B) {
	raw, err := protocol.EncodePayload(protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: protocol.RoleAssistant})
	if err != nil {
		b.Fatal(err)
	}
	f := protocol.RawFrame{Version: protocol.Version, ConversationID: "0b5f3c1e-8a4d-4e6b-9a51-3f4c2d1e0a9b", RequestID: "7d2e9f40-1c3b-4a5d-8e6f-0a1b2c3d4e5f",
		Sequence: 123456, Type: protocol.FrameText, Payload: raw, CreatedAt: 1764662400.123456}
	b.ReportAllocs()
	buf := make([]byte, 0, 1024)
	for b.Loop() {
		if buf, err = protocol.AppendSSE(buf[:0], f); err != nil {
			b.Fatal(err)
		}
	}
}
