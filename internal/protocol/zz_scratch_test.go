package protocol

import (
	"fmt"
	"testing"
)

func TestScratch(t *testing.T) {
	for _, in := range []string{
		`{"version":1,"conversationId":"c","requestId":"r","sequence":1,"type":"tool_result","payload":{"callId":"x","ok":true,"result":[]},"createdAt":1.5}`,
		`{"version":1,"conversationId":"c","requestId":"r","sequence":1,"type":"tool_result","payload":{"callId":"x","ok":true,"result":null},"createdAt":1.5}`,
		`{"version":1,"conversationId":"c","requestId":"r","sequence":1,"type":"ui_command","payload":{"effectId":"e","effect":{"kind":"navigate","space":"mission","params":{"a":1e300}},"expiresAt":3},"createdAt":1.5}`,
		`{"version":1,"conversationId":"c","requestId":"r","sequence":1,"type":"ui_command","payload":{"effectId":"e","effect":{"kind":"navigate","space":"mission","params":{"a":1,"a":2}},"expiresAt":3},"createdAt":1.5}`,
		`{"version":1.0,"conversationId":"c","requestId":"r","sequence":1,"type":"text","payload":{"content":"x","format":"plain"},"createdAt":1.5}`,
	} {
		f, err := DecodeFrame([]byte(in))
		fmt.Printf("%#v %v\n", f, err)
		if err == nil {
			b, err := EncodeFrame(f)
			fmt.Println(string(b), err)
		}
	}
	var r StreamTicketRequest
	fmt.Println(DecodeRequest([]byte(`{"conversation_id":"x","after_sequence":3}`), &r), r)
	fmt.Println(DecodeRequest([]byte(`{"version":1.0,"conversationId":"x","afterSequence":3}`), &r), r)
}
