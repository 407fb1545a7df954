package model_test

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"strings"
	"testing"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/testutil"
)

// pieces is a provider that streams fixed events, then an error.
type pieces struct {
	events []model.Event
	err    error
}

func (p pieces) Name() string { return "pieces" }
func (p pieces) Stream(context.Context, model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		for _, e := range p.events {
			if !yield(e, nil) {
				return
			}
		}
		if p.err != nil {
			yield(model.Event{}, p.err)
		}
	}
}

// collect runs a stream and returns its text, tool calls and error.
func collect(p model.Provider) (string, []model.ToolCall, error) {
	var b strings.Builder
	var calls []model.ToolCall
	for ev, err := range p.Stream(context.Background(), model.Request{}) {
		if err != nil {
			return b.String(), calls, err
		}
		switch ev.Kind {
		case model.EventText:
			b.WriteString(ev.Text)
		case model.EventToolCall:
			calls = append(calls, ev.ToolCall)
		}
	}
	return b.String(), calls, nil
}

// Every split of a text holding secrets into two and three deltas yields a
// text without the secrets.
func TestRedactingTextSplitAnywhere(t *testing.T) {
	t.Parallel()
	texts := []string{
		"Your key is sk-proj-4fX9aQ2LmZ7bT1cR8dV3eW6gH0jK5nP2sU7yB9, keep it safe.\nNext line.",
		"Use password: hunter2 and Authorization: Bearer abcdefghijklmnop0123456789 then --api-key XyZ0123456789abc done",
		"connect to https://admin:hunter2@db.example.com/x and run_sk-ant-api03-Xy7Qm2Lp9Rt4Vw1Zb8Nc3Jd6Kf0H there",
		"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY and AKIAIOSFODNN7EXAMPLE\n\"token\": \"abc def\" ok",
	}
	secrets := []string{"sk-proj-4fX9", "hunter2", "abcdefghijklmnop0123456789", "XyZ0123456789abc", "sk-ant-api03", "wJalrXUtnFEMI",
		"AKIAIOSFODNN7EXAMPLE", "abc def"}
	for _, text := range texts {
		whole, _, _ := collect(model.Redacting(pieces{events: []model.Event{{Kind: model.EventText, Text: text}}}))
		for i := 1; i < len(text); i++ {
			for _, j := range []int{i, (i + len(text)) / 2} {
				evs := []model.Event{{Kind: model.EventText, Text: text[:i]}}
				if j > i {
					evs = append(evs, model.Event{Kind: model.EventText, Text: text[i:j]}, model.Event{Kind: model.EventText, Text: text[j:]})
				} else {
					evs = append(evs, model.Event{Kind: model.EventText, Text: text[i:]})
				}
				got, _, err := collect(model.Redacting(pieces{events: evs}))
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range secrets {
					if strings.Contains(got, s) {
						t.Fatalf("split at %d,%d: %q holds %q", i, j, got, s)
					}
				}
				if got != whole {
					t.Fatalf("split at %d,%d: %q, whole %q", i, j, got, whole)
				}
			}
		}
	}
}

// Tool names and call ids are redacted, arguments are not (a command
// holding a secret is refused by the tools, not run with a marker); error
// messages and details are redacted and keep their code.
func TestRedactingToolCallsAndErrors(t *testing.T) {
	t.Parallel()
	key := "sk-proj-4fX9aQ2LmZ7bT1cR8dV3eW6gH0jK5nP2sU7yB9"
	pe := protocol.Errorf(protocol.ModelFailure, "upstream said: invalid key %s for https://admin:hunter2@api.example", key).With("body", "key="+key)
	p := model.Redacting(pieces{events: []model.Event{{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: "call_" + key, Name: "run_" + key,
		Arguments: []byte(`{"a":"` + key + `"}`)}}}, err: pe})
	_, calls, err := collect(p)
	if len(calls) != 1 || strings.Contains(calls[0].ID+calls[0].Name, key) || !strings.Contains(string(calls[0].Arguments), key) {
		t.Fatalf("calls: %+v", calls)
	}
	var got *protocol.Error
	if !errors.As(err, &got) || got.Code != protocol.ModelFailure || strings.Contains(got.Message, key) || strings.Contains(got.Message, "hunter2") ||
		strings.Contains(got.Details["body"].(string), key) {
		t.Fatalf("error: %#v", err)
	}
	if strings.Contains(pe.Message, "[redacted]") {
		t.Fatal("the provider's own error was changed")
	}
	plain := errors.New("dial: password=hunter2")
	_, _, err = collect(model.Redacting(pieces{err: plain}))
	if !errors.Is(err, plain) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("plain error: %v", err)
	}
	_, _, err = collect(model.Redacting(pieces{err: context.Canceled}))
	if err != context.Canceled {
		t.Fatalf("context error: %v", err)
	}
}

// A server's message is redacted before it is cut: a key cut first would
// lose its shape and pass.
func TestServerMessageRedactedBeforeTruncation(t *testing.T) {
	t.Parallel()
	key := "sk-ant-api03-ZyXwVuTsRqPoNmLkJiHgFeDcBa0123456789"
	msg := strings.Repeat("x", model.MaxServerMessage-20) + " " + key
	got := model.TruncateServerMessage(msg)
	if strings.Contains(got, "sk-ant-api03-ZyX") || strings.Contains(got, "ZyXwVu") {
		t.Fatalf("%q", got)
	}
}

// Text made of words that name secrets, with no value after them, is not
// held back: each piece releases the one before (a stream of "token-N "
// pieces is shown as it comes, not when 16 KiB have gathered).
func TestRedactingReleasesKeyNamesWithoutValues(t *testing.T) {
	t.Parallel()
	var r model.TextRedactor
	out := r.Write("token-0 ")
	for i := 1; i < 100; i++ {
		out += r.Write("token-" + strconv.Itoa(i) + " ")
		if !strings.Contains(out, "token-"+strconv.Itoa(i-1)+" ") {
			t.Fatalf("after piece %d only %q was released", i, out)
		}
	}
	if out+r.Flush() != joinTokens(100) {
		t.Fatalf("%q", out)
	}
}

func joinTokens(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("token-" + strconv.Itoa(i) + " ")
	}
	return b.String()
}

// Secrets the rule set finds only with the words before them (a keyword
// and a separator), tokens without a prefix, and values known by value:
// split anywhere, at most the first minHeldWord-1 characters of a token
// without a prefix show (a word that short is shown at once), never more.
func TestRedactingTextSplitNeedsContext(t *testing.T) {
	t.Parallel()
	const bare = "Qm9vdHN0cmFwVG9rZW4tRm9yLVRlc3RzLTAxMjM0NTY" // 43 characters, base64url
	const known = "zz-known-provider-key-9f8e7d6c"
	redact.AddKnown(known)
	cases := []struct{ text, secret string }{
		{"config: adafruit_key = 'a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5' set", "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"},
		{"the token is " + bare + " now", bare[3:]},
		{"use " + known + " for it", known},
	}
	for _, c := range cases {
		for i := 1; i < len(c.text); i++ {
			evs := []model.Event{{Kind: model.EventText, Text: c.text[:i]}, {Kind: model.EventText, Text: c.text[i:]}}
			got, _, err := collect(model.Redacting(pieces{events: evs}))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(got, c.secret) || !strings.Contains(got, "[redacted]") {
				t.Fatalf("split at %d: %q", i, got)
			}
		}
	}
}

// BenchmarkTextRedactor is the redaction of a model's text as it streams,
// per piece: "stamps" are studio bench's tokens (a time stamp and ';', no
// blank or line break, so the line released so far is always long),
// "prose" words of a paragraph with a line break now and then.
func BenchmarkTextRedactor(b *testing.B) {
	for _, c := range []struct {
		name  string
		piece func(i int) string
	}{
		{"stamps", func(i int) string { return "t" + strconv.Itoa(1_765_000_000_000_000_000+i*487_000) + ";" }},
		{"prose", func(i int) string {
			if i%80 == 79 {
				return "done.\n"
			}
			return []string{"the ", "frame ", "was ", "stored ", "before ", "it ", "reached ", "streams ", "and ", "clients, "}[i%10]
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			pieces := make([]string, 1000)
			for i := range pieces {
				pieces[i] = c.piece(i)
			}
			var r model.TextRedactor
			i := 0
			cpu := testutil.ProcessCPU()
			for b.Loop() {
				r.Write(pieces[i%len(pieces)])
				i++
			}
			// The machine's other work stretches ns/op; the CPU is this one's.
			b.ReportMetric(float64(testutil.ProcessCPU()-cpu)/float64(i), "cpu-ns/op")
		})
	}
}

// A line longer than the context a piece is redacted after, streamed piece
// by piece, comes out as the whole line redacted at once: the context the
// redactor keeps (and reuses from one piece to the next) is enough for
// every secret in it, wherever the line was cut back.
func TestRedactingLongLine(t *testing.T) {
	t.Parallel()
	const key = "sk-proj-4fX9aQ2LmZ7bT1cR8dV3eW6gH0jK5nP2sU7yB9"
	var text strings.Builder
	for i := range 400 {
		if i%37 == 36 {
			text.WriteString("api_key = " + key + ";")
			continue
		}
		text.WriteString("t" + strconv.Itoa(1_765_000_000_000_000_000+i*487_000) + ";")
	}
	s := text.String()
	whole, _, _ := collect(model.Redacting(pieces{events: []model.Event{{Kind: model.EventText, Text: s}}}))
	for _, size := range []int{1, 7, 21, 64, 333} {
		var evs []model.Event
		for i := 0; i < len(s); i += size {
			evs = append(evs, model.Event{Kind: model.EventText, Text: s[i:min(len(s), i+size)]})
		}
		got, _, err := collect(model.Redacting(pieces{events: evs}))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, key[:12]) || got != whole {
			t.Fatalf("pieces of %d: %q, whole %q", size, got, whole)
		}
	}
}

// A value that becomes known while a line streams is not shown again: the
// line's redaction kept from the piece before is not reused once a value
// was added (it would differ from the line's redaction now, and the
// difference would be released a second time).
func TestRedactingKnownMidLine(t *testing.T) {
	const value = "zz-later-known-value-7c6b5a49"
	var r model.TextRedactor
	out := r.Write("sent " + value + " to them ")
	redact.AddKnown(value)
	next := r.Write("and more ")
	if next != "and more " {
		t.Fatalf("after the value became known: %q (before: %q)", next, out)
	}
}
