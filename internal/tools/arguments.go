package tools

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
)

// Bounds of a tool call's arguments: past them the call is answered with a
// validation result, before anything decodes or stores them.
const (
	MaxArgumentBytes = 64 << 10
	MaxArgumentDepth = 32
)

// CheckArguments says what is wrong with a tool call's arguments as the
// model sent them, or nil: they must be one JSON object (an empty text is
// the empty object), valid UTF-8, without duplicate member names, numbers
// a float64 holds, at most MaxArgumentBytes and MaxArgumentDepth deep.
// The error is validation, its reason detail one of: too_large,
// invalid_utf8, not_json, truncated, trailing_text, duplicate_name,
// not_object, too_deep, number_out_of_range. The model reads it as the
// call's result and may correct the call.
func CheckArguments(tool string, args []byte) error {
	bad := func(reason, format string, a ...any) error {
		return protocol.Errorf(protocol.Validation, "the arguments of %s %s", tool, redact.Text(fmt.Sprintf(format, a...))).
			With("tool", tool).With("reason", reason)
	}
	args = bytes.TrimSpace(args)
	switch {
	case len(args) == 0:
		return nil
	case len(args) > MaxArgumentBytes:
		return bad("too_large", "are %d bytes; at most %d are read: send less", len(args), MaxArgumentBytes)
	case !utf8.Valid(args):
		return bad("invalid_utf8", "are not valid UTF-8: send text as JSON strings")
	}
	dec := jsontext.NewDecoder(bytes.NewReader(args))
	first, done := true, false
	for {
		tok, err := dec.ReadToken()
		if err == nil && done {
			return bad("trailing_text", "have text after the JSON object (at byte %d): send one object and nothing else", dec.InputOffset()-int64(len(tok.String())))
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var se *jsontext.SyntacticError
			switch {
			case errors.Is(err, io.ErrUnexpectedEOF):
				return bad("truncated", "end before the JSON object is complete (%d bytes): send the whole object", len(args))
			case errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName):
				return bad("duplicate_name", "name a member twice (at %s): each member once", se.JSONPointer)
			case done:
				return bad("trailing_text", "have text after the JSON object (at byte %d): send one object and nothing else", dec.InputOffset())
			default:
				return bad("not_json", "are not JSON (%s): send one JSON object", cleanSyntax(err))
			}
		}
		if first && tok.Kind() != '{' {
			return bad("not_object", "must be a JSON object, not %s: send {\"name\": value, …}", kindName(tok.Kind()))
		}
		first = false
		done = dec.StackDepth() == 0
		if dec.StackDepth() > MaxArgumentDepth {
			return bad("too_deep", "are nested deeper than %d levels: send a flatter object", MaxArgumentDepth)
		}
		if tok.Kind() == '0' {
			if f, err := strconv.ParseFloat(tok.String(), 64); err != nil || math.IsInf(f, 0) {
				return bad("number_out_of_range", "hold the number %.40s, out of range: numbers must fit a float64", tok.String())
			}
		}
	}
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "that"
}

// cleanSyntax is a decoder's message without its package name.
func cleanSyntax(err error) string {
	s := err.Error()
	if rest, ok := bytes.CutPrefix([]byte(s), []byte("jsontext: ")); ok {
		return string(rest)
	}
	return s
}
