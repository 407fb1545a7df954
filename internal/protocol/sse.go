package protocol

import "strconv"

// AppendSSE appends f as one Server-Sent Event (DESIGN.md §6): its
// sequence as the event id and the frame's JSON as one data line, with no
// event name. A stream writes these bytes as they are, so a frame is
// encoded once however many streams it goes to.
func AppendSSE(dst []byte, f RawFrame) ([]byte, error) {
	b, err := Marshal(f)
	if err != nil {
		return dst, err
	}
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, f.Sequence, 10)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...), nil
}
