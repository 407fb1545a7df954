package model

import (
	"context"
	"errors"
	"iter"
	"maps"
	"strings"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
)

// Redacting wraps a provider so that everything it writes passes the
// redactor (package redact) before anyone stores it: text, tool names and
// call ids, and error messages and details. Tool call arguments pass as
// they are: the tool_call frame shows them redacted, and a command or
// effect that holds a secret is refused (package tools) rather than run
// with a marker in place of a value.
//
// Text is redacted as a stream: a secret split across two deltas is still
// one secret. What could be the start of one (the text after the last
// line break, or after a word that introduces a value) is held back until
// the text goes on or the stream ends; an empty delta keeps the consumer's
// idle deadline informed meanwhile.
func Redacting(p Provider) Provider {
	switch p.(type) {
	case redacting, redactingChecker:
		return p
	}
	if c, ok := p.(Checker); ok {
		return redactingChecker{redacting{p}, c}
	}
	return redacting{p}
}

type redacting struct{ Provider }

// redactingChecker is a redacting provider whose provider reports its own
// health: the report is redacted too.
type redactingChecker struct {
	redacting
	c Checker
}

// Check reports the underlying provider's health, redacted.
func (r redactingChecker) Check(ctx context.Context) error { return RedactError(r.c.Check(ctx)) }

func (r redacting) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		var text TextRedactor
		for ev, err := range r.Provider.Stream(ctx, req) {
			if err != nil {
				if rest := text.Flush(); rest != "" && !yield(Event{Kind: EventText, Text: rest}, nil) {
					return
				}
				yield(Event{}, RedactError(err))
				return
			}
			switch ev.Kind {
			case EventText:
				ev.Text = text.Write(ev.Text)
			case EventToolCall:
				// Text before a tool call is complete.
				if rest := text.Flush(); rest != "" && !yield(Event{Kind: EventText, Text: rest}, nil) {
					return
				}
				ev.ToolCall.Name = redact.Name(ev.ToolCall.Name)
				ev.ToolCall.ID = redact.Name(ev.ToolCall.ID)
			}
			if !yield(ev, nil) {
				return
			}
		}
		if rest := text.Flush(); rest != "" {
			yield(Event{Kind: EventText, Text: rest}, nil)
		}
	}
}

// RedactError returns err with its message, and for a *protocol.Error its
// string details, redacted. Context errors pass as they are (their messages
// are fixed, and callers compare them); other errors keep their chain for
// errors.Is and errors.As.
func RedactError(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		c := *pe
		c.Message = redact.Text(pe.Message)
		if pe.Details != nil {
			c.Details = maps.Clone(pe.Details)
			for k, v := range c.Details {
				if s, ok := v.(string); ok {
					c.Details[k] = redact.Text(s)
				}
			}
		}
		return &c
	}
	msg := err.Error()
	if red := redact.Text(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

// redactedError shows a redacted message over the original error.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// TextRedactor redacts text that arrives in pieces.
type TextRedactor struct {
	held strings.Builder
	// line is the raw text of the current line released so far (its last
	// maxContext bytes at least): a piece is redacted after it, so that a
	// rule that needs the words before a value (api_key = …, adafruit
	// token: …) sees them.
	line string
	// lineRedacted is redact.Text(line) when lineKnown: the previous
	// release redacted exactly line, so the next need not again, unless a
	// value became known since (lineGen, redact.KnownGeneration).
	lineRedacted string
	lineKnown    bool
	lineGen      uint64
}

// maxContext bounds the released text a piece is redacted after: the line
// is cut back to it once it is contextSlack longer, so that most pieces
// reuse the line's redaction from the piece before.
const (
	maxContext   = 512
	contextSlack = maxContext / 4
)

// maxHeld is the most text held back waiting for the rest of a possible
// secret; past it the text is released, redacted as it stands.
const maxHeld = 16 << 10

// Write takes the next piece and returns the redacted text that is safe to
// release now (possibly empty).
func (t *TextRedactor) Write(s string) string {
	t.held.WriteString(s)
	all := t.held.String()
	cut := safeCut(all)
	if cut == 0 && len(all) < maxHeld {
		return ""
	}
	if cut == 0 {
		cut = len(all)
	}
	t.held.Reset()
	t.held.WriteString(all[cut:])
	return t.release(all[:cut])
}

// release redacts a piece after the line released so far, and remembers it.
func (t *TextRedactor) release(piece string) string {
	ctx, line, gen := t.line, t.line+piece, redact.KnownGeneration()
	var out, both string
	if ctx == "" {
		out = redact.Text(piece)
		both = out
	} else {
		before := t.lineRedacted
		if !t.lineKnown || t.lineGen != gen {
			before = redact.Text(ctx)
		}
		both = redact.Text(line)
		if strings.HasPrefix(both, before) {
			out = both[len(before):]
		} else {
			// A secret began in what was released (a word too short to
			// hold back, minHeldWord): what follows the released part of it
			// is hidden with the rest.
			n := 0
			for n < len(before) && n < len(both) && before[n] == both[n] {
				n++
			}
			if rest := both[n:]; strings.HasPrefix(rest, redact.Secret) {
				out = rest
			} else {
				out = redact.Text(piece)
			}
		}
	}
	t.lineKnown = true
	if nl := strings.LastIndexByte(line, '\n'); nl >= 0 {
		line = line[nl+1:]
		t.lineKnown = line == ""
	}
	if len(line) > maxContext+contextSlack {
		line = line[len(line)-maxContext:]
		t.lineKnown = false
	}
	t.line, t.lineRedacted, t.lineGen = line, "", gen
	if t.lineKnown && line != "" {
		t.lineRedacted = both
	}
	return out
}

// Flush returns what is held, redacted.
func (t *TextRedactor) Flush() string {
	s := t.held.String()
	t.held.Reset()
	if s == "" {
		return ""
	}
	return t.release(s)
}

// safeCut is where s can be cut with no secret across the cut: after the
// last line break (unless a PEM block is open); within the last line,
// after the last space whose preceding words introduce no value ("password:",
// "Bearer", "--token", an open quote) — a token never holds a space.
func safeCut(s string) int {
	if b := strings.LastIndex(s, "-----BEGIN"); b >= 0 && !strings.Contains(s[b:], "-----END") {
		return lineStart(s, b)
	}
	line := strings.LastIndexByte(s, '\n') + 1
	// A key's name at the very end ("password", "api_key ") waits for what
	// follows it: ": value" would make a secret of the value.
	end := len(s)
	if k := trailingKeyName(s[line:]); k >= 0 {
		end = line + k
	}
	// The word being written, when nothing before it introduces a value
	// and it cannot be the start of a token or a key's name, goes too: a
	// model that pauses mid-word ("Found 3") is shown at once.
	if w := strings.LastIndexAny(s[:end], " \t\n") + 1; w >= line && !introducesValue(s[line:w]) && !mightStartSecret(s[w:end]) {
		return end
	}
	for i := end - 1; i > line && i >= end-scanBack; i-- {
		if s[i] == ' ' && !introducesValue(s[line:i+1]) && trailingKeyName(s[line:i+1]) < 0 {
			return i + 1
		}
	}
	return line
}

// trailingKeyName is where the last word of a line starts when it names a
// secret (followed by blanks at most), or -1.
func trailingKeyName(line string) int {
	t := strings.TrimRight(line, " \t")
	j := strings.LastIndexAny(t, " \t") + 1
	if w := strings.Trim(t[j:], `"'`); w != "" && redact.SecretKey(w) {
		return j
	}
	return -1
}

// mightStartSecret reports whether a word being written could become (or
// already holds the start of) something the redactor hides once more text
// arrives: a token shape, a URL with a password, a key's name with its
// value, a PEM block — and, since a token may have no prefix at all (the
// owner token, a ticket, a configured key known by value), any word of a
// token's characters of minHeldWord or more.
func mightStartSecret(w string) bool {
	if w == "" {
		return false
	}
	if len(w) >= minHeldWord && strings.IndexFunc(w, func(r rune) bool { return r >= 0x80 || !isAlnum(byte(r)) && r != '_' && r != '-' && r != '.' }) < 0 {
		return true
	}
	if strings.ContainsAny(w, ":=@\\/\"'") || strings.Contains(w, "--") {
		return true
	}
	for b := 0; b < len(w); b++ {
		if b > 0 && isAlnum(w[b-1]) {
			continue // a token starts a word, or follows a non-alphanumeric character
		}
		seg, low := w[b:], strings.ToLower(w[b:])
		for _, p := range secretStarts {
			if strings.HasPrefix(seg, p) || strings.HasPrefix(p, seg) || strings.HasPrefix(low, p) || strings.HasPrefix(p, low) {
				return true
			}
		}
	}
	return false
}

// minHeldWord is the shortest word of a token's characters held back: a
// shorter one is shown at once (a model pausing at "Found 3"), and should
// it turn out to start a token without a prefix, the rest of the token is
// hidden — no more of it shows than the visible start of a personal token
// (stu_ and 8 characters) does.
const minHeldWord = 4

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// secretStarts are how the redactor's token shapes and the names of keys
// that hold secrets begin.
var secretStarts = []string{"sk-", "sk_", "rk_", "pk_", "gh", "github_pat_", "glpat-", "xox", "xapp-", "AKIA", "ASIA", "ABIA", "ACCA",
	"AIDA", "AROA", "ANPA", "AIza", "npm_", "hf_", "pypi-", "eyJ", "-----",
	"pass", "pwd", "secret", "token", "credential", "cookie", "auth", "api", "key", "private", "access", "bearer", "basic", "signature"}

// scanBack bounds how far back safeCut looks for a space in a line.
const scanBack = 512

func lineStart(s string, i int) int { return strings.LastIndexByte(s[:i], '\n') + 1 }

// introducesValue reports whether the end of s could introduce a secret
// that follows: "password:", "token =", "Bearer", "--api-key", or an open
// quote.
func introducesValue(s string) bool {
	tail := strings.TrimRight(s, " \t\r\n")
	if tail == "" {
		return false
	}
	switch tail[len(tail)-1] {
	case ':', '=', '>', '"', '\'', '\\':
		return true
	}
	fields := strings.Fields(tail[max(0, len(tail)-128):])
	if len(fields) == 0 {
		return false
	}
	last := strings.ToLower(strings.Trim(fields[len(fields)-1], `"'`))
	if last == "bearer" || last == "basic" || strings.HasPrefix(last, "-") {
		return true
	}
	// A quoted value still open: an odd number of quotes on the line.
	return strings.Count(tail, `"`)%2 == 1
}
