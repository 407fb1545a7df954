package protocol

import (
	"fmt"
	"math"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// AppendSSE appends f as one Server-Sent Event (docs/design.md §11): its
// sequence as the event id and the frame's JSON as one data line, with no
// event name. A stream writes these bytes as they are, so a frame is
// encoded once however many streams it goes to.
//
// The envelope is written by hand, not through Marshal's reflection, and
// the stored payload is spliced in: replay encodes every frame it reads,
// and reflection cost more than the store's read of the frame. The bytes
// are Marshal's (sse_test.go compares the two): strings quoted as Marshal
// quotes them, the float as Marshal formats it, and the payload formatted
// with Marshal's defaults (compact, names unique, valid UTF-8), which
// leaves a payload the store wrote through Marshal as it is.
func AppendSSE(dst []byte, f RawFrame) ([]byte, error) {
	start := len(dst)
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, f.Sequence, 10)
	dst = append(dst, "\ndata: {\"version\":"...)
	dst = strconv.AppendInt(dst, int64(f.Version), 10)
	dst = append(dst, `,"conversationId":`...)
	dst, err := jsontext.AppendQuote(dst, f.ConversationID)
	if err != nil {
		return dst[:start], fmt.Errorf("marshal: conversationId: %w", err)
	}
	dst = append(dst, `,"requestId":`...)
	if dst, err = jsontext.AppendQuote(dst, f.RequestID); err != nil {
		return dst[:start], fmt.Errorf("marshal: requestId: %w", err)
	}
	dst = append(dst, `,"sequence":`...)
	dst = strconv.AppendInt(dst, f.Sequence, 10)
	dst = append(dst, `,"type":`...)
	if dst, err = jsontext.AppendQuote(dst, string(f.Type)); err != nil {
		return dst[:start], fmt.Errorf("marshal: type: %w", err)
	}
	dst = append(dst, `,"payload":`...)
	if dst, err = jsontext.AppendFormat(dst, f.Payload); err != nil {
		return dst[:start], fmt.Errorf("marshal: payload: %w", err)
	}
	if math.IsNaN(f.CreatedAt) || math.IsInf(f.CreatedAt, 0) {
		return dst[:start], fmt.Errorf("marshal: createdAt: unsupported value %v", f.CreatedAt)
	}
	dst = append(dst, `,"createdAt":`...)
	dst = jsontext.AppendFloat(dst, f.CreatedAt, 64)
	return append(dst, "}\n\n"...), nil
}
