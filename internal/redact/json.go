package redact

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// JSON redacts a JSON document: every string value and every member name
// goes through Text, and the value of a member whose name is a SecretKey is
// replaced whole (a string, number, object or array; null, booleans and
// empty strings say nothing and stay). A name that held a secret becomes
// the marker, numbered when one object has several ("[redacted]",
// "[redacted]2"), so that names stay distinct. The result is valid JSON
// whenever the input is; input that is not JSON is redacted as text.
func JSON(b []byte) []byte { return redactJSON(b, Text) }

// SecretsJSON is JSON with Secrets for Text: host paths stay.
func SecretsJSON(b []byte) []byte { return redactJSON(b, Secrets) }

func redactJSON(b []byte, text func(string) string) []byte {
	out, err := walkJSON(b, text)
	if err != nil {
		return []byte(text(string(b)))
	}
	return out
}

func walkJSON(b []byte, text func(string) string) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	var buf bytes.Buffer
	buf.Grow(len(b))
	enc := jsontext.NewEncoder(&buf)
	secretNext := false
	renamed := map[int]int{} // depth → names redacted in the object open there
	for {
		kind := dec.PeekKind()
		depth := dec.StackDepth()
		inObject, n := dec.StackIndex(depth)
		isName := inObject == '{' && n%2 == 0 && kind == '"'
		switch {
		case isName:
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := tok.String()
			secretNext = SecretKey(name)
			if red := text(name); red != name {
				renamed[depth]++
				if n := renamed[depth]; n > 1 {
					red += strconv.Itoa(n)
				}
				tok = jsontext.String(red)
			}
			if err := enc.WriteToken(tok); err != nil {
				return nil, err
			}
		case secretNext && kind != 0 && kind != '}' && kind != ']':
			secretNext = false
			v, err := dec.ReadValue()
			if err != nil {
				return nil, err
			}
			switch v.Kind() {
			case 'n', 't', 'f':
				err = enc.WriteValue(v)
			case '"':
				if string(v) == `""` {
					err = enc.WriteValue(v)
				} else {
					err = enc.WriteToken(jsontext.String(Secret))
				}
			default:
				err = enc.WriteToken(jsontext.String(Secret))
			}
			if err != nil {
				return nil, err
			}
		case kind == '"':
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			if err := enc.WriteToken(jsontext.String(text(tok.String()))); err != nil {
				return nil, err
			}
		default:
			if kind == '}' {
				delete(renamed, depth)
			}
			tok, err := dec.ReadToken()
			if errors.Is(err, io.EOF) {
				return bytes.TrimRight(buf.Bytes(), "\n"), nil
			}
			if err != nil {
				return nil, err
			}
			if err := enc.WriteToken(tok); err != nil {
				return nil, err
			}
		}
	}
}

// Pointer redacts a JSON pointer (RFC 6901, the leading slash optional)
// segment by segment, unescaped:
// a member name that held a secret is hidden even though the pointer
// escapes its slashes ("https:~1~1hooks.example~1…").
func Pointer(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		u := pointerUnescaper.Replace(s)
		if r := Text(u); r != u {
			segs[i] = pointerEscaper.Replace(r)
		}
	}
	return strings.Join(segs, "/")
}

var (
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
)
