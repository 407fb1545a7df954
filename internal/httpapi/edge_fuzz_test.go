package httpapi

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/studio/operator/internal/protocol"
)

// FuzzAPIPath checks the path-id validator: a path it accepts has only
// segments that are valid UTF-8 without control characters, slashes or dot
// segments, short enough, and encodable in any answer that quotes them; a
// path it refuses gets a typed validation error that is itself encodable.
func FuzzAPIPath(f *testing.F) {
	for _, s := range []string{"api/operator/conversations/6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1", "api/app/playbooks/%ff",
		"api/app/runs/%c3%28", "api/x/..", "api/x/%2e%2e", "api/x/a%00b", "api//x", "api/x/a%2Fb", "api/x/%zz", "api/é/%E2%82%AC"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		err := checkAPIPath("/" + rest)
		if err != nil {
			pe, ok := err.(*protocol.Error)
			if !ok || pe.Code != protocol.Validation {
				t.Fatalf("checkAPIPath(%q) = %v, want a validation error", rest, err)
			}
			if _, merr := protocol.Marshal(protocol.ErrorBody{Error: pe}); merr != nil {
				t.Fatalf("the error for %q cannot be encoded: %v", rest, merr)
			}
			return
		}
		for _, seg := range strings.Split(rest, "/") {
			v, uerr := url.PathUnescape(seg)
			switch {
			case uerr != nil:
				t.Fatalf("accepted %q with a bad escape", rest)
			case v == "" || v == "." || v == "..":
				t.Fatalf("accepted %q with segment %q", rest, v)
			case len(v) > maxPathSegment || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) || strings.ContainsAny(v, `/\`):
				t.Fatalf("accepted %q with segment %q", rest, v)
			}
			if _, merr := protocol.Marshal(protocol.Errorf(protocol.NotFound, "conversation %s not found", v)); merr != nil {
				t.Fatalf("accepted %q, whose segment %q cannot be encoded: %v", rest, v, merr)
			}
		}
	})
}

func TestHasEscapedNUL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{`"a\u0000"`: true, `"\\u0000"`: false, `"\\\u0000"`: true, `"u0000"`: false, `\u0000`: true, `"\u00001"`: true} {
		if got := hasEscapedNUL([]byte(in)); got != want {
			t.Errorf("hasEscapedNUL(%s) = %v", in, got)
		}
	}
}
