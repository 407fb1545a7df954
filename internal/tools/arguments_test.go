package tools_test

import (
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/tools"
)

// Each kind of malformed arguments is named by its reason.
func TestCheckArgumentsKinds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, reason string }{
		{`{"a":1`, "truncated"},
		{`{"a":1}x`, "trailing_text"},
		{`{"a":1} {"b":2}`, "trailing_text"},
		{`[1,2]`, "not_object"},
		{`"x"`, "not_object"},
		{`{"a":1,"a":2}`, "duplicate_name"},
		{"{\"a\":\"\xff\"}", "invalid_utf8"},
		{`{"a":NaN}`, "not_json"},
		{`{"a":1e999}`, "number_out_of_range"},
		{strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), "too_deep"},
		{`{"a":"` + strings.Repeat("x", tools.MaxArgumentBytes) + `"}`, "too_large"},
		{strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100), "too_deep"},
		{`{'a':1}`, "not_json"},
		{`{"a":1,}`, "not_json"},
		{`{"a":01}`, "not_json"},
		{`{"a":"x}`, "truncated"},
		{`{}`, ""}, {``, ""}, {` {"a":[1,{"b":null}]} `, ""},
	} {
		err := tools.CheckArguments("t", []byte(c.in))
		got := ""
		if err != nil {
			got, _ = protocolReason(err)
		}
		if got != c.reason {
			t.Errorf("%.40q: reason %q, want %q (%v)", c.in, got, c.reason, err)
		}
	}
}

func protocolReason(err error) (string, bool) {
	pe := protocol.ErrorOf(err)
	if pe.Code != protocol.Validation {
		return "code " + string(pe.Code), false
	}
	r, ok := pe.Details["reason"].(string)
	return r, ok
}
