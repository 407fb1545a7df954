package main

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
)

// Times in -o json: the wire carries them as Unix seconds (docs/protocol.md),
// which a person reading the output or a script comparing dates has to
// convert; every JSON document the CLI prints writes them as RFC 3339 in
// UTC instead ("2025-06-01T04:00:00.123456Z"). Which members are times is
// decided by name, the convention every wire type follows: a name ending
// in "At" or "_at", "at", and the interval bounds since, until, start,
// end, deletedBefore and next (an array of times). A test holds every
// number member of the wire types to the rule.

// timeNames are the time members whose names do not end in At.
var timeNames = map[string]bool{"at": true, "since": true, "until": true, "start": true, "end": true, "deletedBefore": true, "next": true}

// isTimeName reports whether a member of that name holds a time.
func isTimeName(name string) bool {
	return timeNames[name] || strings.HasSuffix(name, "At") || strings.HasSuffix(name, "_at")
}

// rfc3339Micro is RFC 3339 with the wire's microseconds, trailing zeros dropped.
const rfc3339Micro = "2006-01-02T15:04:05.999999Z07:00"

// wireTime formats a wire timestamp (Unix seconds) as RFC 3339 in UTC.
func wireTime(ts float64) string { return protocol.Time(ts).Format(rfc3339Micro) }

// readableTimes rewrites b, one JSON value, with every time member (and
// every number of a time array) as an RFC 3339 string; the rest is
// copied unchanged, in order.
func readableTimes(b []byte) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if tok.Kind() == '0' && atTime(dec.StackPointer()) {
			if f, err := strconv.ParseFloat(tok.String(), 64); err == nil {
				tok = jsontext.String(wireTime(f))
			}
		}
		if err := enc.WriteToken(tok); err != nil {
			return nil, err
		}
	}
	return bytes.TrimRight(out.Bytes(), "\n"), nil
}

// atTime reports whether the value at p is a time: a time member, or an
// element of a time member's array.
func atTime(p jsontext.Pointer) bool {
	last := p.LastToken()
	if isTimeName(last) {
		return true
	}
	if _, err := strconv.Atoi(last); err == nil {
		return isTimeName(p.Parent().LastToken())
	}
	return false
}
