// Package logrepeat is a log/slog handler that keeps a storm of one
// failure from flooding the log: while a database is down, a loop that
// retries every 250 ms would write the same error line four times a
// second. The first line of a run of identical failures is written as it
// is; the repeats are counted, and one summary line follows once they stop
// (or every MaxWindow while they go on): "claim run failed (52 times in
// 14s)" with the error, the count, the span and the ids the repeats named.
//
// Identical means: the same level and message, the same error text once
// its numbers are set aside (a port or a count that changes does not make
// a new failure), from a logger with the same attributes. Only warnings
// and errors with an "err" attribute are summarised; every other line
// passes through untouched.
package logrepeat

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultQuiet     = 5 * time.Second
	DefaultMaxWindow = time.Minute
)

// idKeys are the attributes a summary lists the distinct values of: the
// ids that let a reader follow the repeats.
var idKeys = []string{"conversation", "request", "run", "proposal", "delivery", "webhook", "instance", "model"}

// maxIDs bounds the values a summary lists per id key.
const maxIDs = 10

// Options tune a Handler; zero fields are the defaults.
type Options struct {
	// Quiet is how long a failure must stay away for its run to end: the
	// summary is written then, and the next occurrence is written whole.
	Quiet time.Duration
	// MaxWindow is the longest run a summary covers: a failure that goes
	// on is summarised this often.
	MaxWindow time.Duration
}

// Handler summarises repeated failure lines (see the package comment)
// and hands everything else to the handler it wraps.
type Handler struct {
	inner  slog.Handler
	prefix string // the attributes and groups of WithAttrs/WithGroup, as part of the key
	s      *state
}

// state is what a Handler and those derived from it share.
type state struct {
	opts Options
	mu   sync.Mutex
	runs map[string]*run
}

// run is one failure's run of repeats.
type run struct {
	h       *Handler // the handler that wrote the first line: the summary goes through it
	level   slog.Level
	msg     string
	err     string    // the first occurrence's error text
	start   time.Time // the records' times: the span a summary says
	last    time.Time
	touched time.Time // when it last repeated, by the timers' clock
	repeats int       // occurrences after the first, since start
	ids     map[string][]string
	more    map[string]int // ids past maxIDs, by key
	timer   *time.Timer
}

var _ slog.Handler = (*Handler)(nil)

// New wraps inner.
func New(inner slog.Handler, opts Options) *Handler {
	if opts.Quiet <= 0 {
		opts.Quiet = DefaultQuiet
	}
	if opts.MaxWindow <= 0 {
		opts.MaxWindow = DefaultMaxWindow
	}
	return &Handler{inner: inner, s: &state{opts: opts, runs: map[string]*run{}}}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	p := h.prefix
	for _, a := range as {
		p += a.String() + " "
	}
	return &Handler{inner: h.inner.WithAttrs(as), prefix: p, s: h.s}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), prefix: h.prefix + name + ".", s: h.s}
}

// numbers are set aside in the key: "read tcp 127.0.0.1:54321" and
// "...:54322" are the same failure.
var numbers = regexp.MustCompile(`[0-9]+`)

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	errText, ok := failure(r)
	if !ok {
		return h.inner.Handle(ctx, r)
	}
	key := fmt.Sprintf("%d\x00%s\x00%s\x00%s", r.Level, h.prefix, r.Message, numbers.ReplaceAllString(errText, "#"))
	s := h.s
	s.mu.Lock()
	if ru := s.runs[key]; ru != nil {
		ru.repeats++
		ru.last, ru.touched = r.Time, time.Now()
		ru.collect(r)
		var summary *slog.Record
		if r.Time.Sub(ru.start) >= s.opts.MaxWindow {
			summary = ru.summary()
			ru.start, ru.repeats, ru.ids, ru.more = r.Time, 0, nil, nil
		}
		ru.timer.Reset(s.opts.Quiet)
		s.mu.Unlock()
		if summary != nil {
			return ru.h.inner.Handle(ctx, *summary)
		}
		return nil
	}
	ru := &run{h: h, level: r.Level, msg: r.Message, err: errText, start: r.Time, last: r.Time, touched: time.Now()}
	ru.timer = time.AfterFunc(s.opts.Quiet, func() { s.end(key, ru) })
	s.runs[key] = ru
	s.mu.Unlock()
	return h.inner.Handle(ctx, r)
}

// Flush writes the summaries of the runs still going (at shutdown).
func (h *Handler) Flush() {
	s := h.s
	s.mu.Lock()
	var out []*run
	for key, ru := range s.runs {
		ru.timer.Stop()
		delete(s.runs, key)
		out = append(out, ru)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *run) int { return a.start.Compare(b.start) })
	for _, ru := range out {
		ru.write()
	}
}

// end closes a run that has been quiet for Options.Quiet.
func (s *state) end(key string, ru *run) {
	s.mu.Lock()
	if s.runs[key] != ru || time.Since(ru.touched) < s.opts.Quiet {
		// A repeat came as the timer fired: its Reset runs this again.
		s.mu.Unlock()
		return
	}
	delete(s.runs, key)
	s.mu.Unlock()
	ru.write()
}

// write writes the run's summary when there were repeats.
func (ru *run) write() {
	if r := ru.summary(); r != nil {
		_ = ru.h.inner.Handle(context.Background(), *r)
	}
}

// summary is the run's summary line; nil when nothing repeated.
func (ru *run) summary() *slog.Record {
	if ru.repeats == 0 {
		return nil
	}
	total := ru.repeats + 1
	span := ru.last.Sub(ru.start)
	r := slog.NewRecord(time.Now(), ru.level, fmt.Sprintf("%s (%d times in %s)", ru.msg, total, roundSpan(span)), 0)
	r.AddAttrs(slog.Int("repeated", total), slog.Duration("over", span), slog.String("err", ru.err))
	for _, k := range idKeys {
		vs := ru.ids[k]
		if len(vs) == 0 {
			continue
		}
		v := strings.Join(vs, ",")
		if n := ru.more[k]; n > 0 {
			v += fmt.Sprintf(" and %d more", n)
		}
		r.AddAttrs(slog.String(k+"s", v))
	}
	return &r
}

// collect keeps the distinct ids a repeat names.
func (ru *run) collect(r slog.Record) {
	r.Attrs(func(a slog.Attr) bool {
		if !slices.Contains(idKeys, a.Key) {
			return true
		}
		v := a.Value.Resolve().String()
		if v == "" {
			return true
		}
		if ru.ids == nil {
			ru.ids, ru.more = map[string][]string{}, map[string]int{}
		}
		switch vs := ru.ids[a.Key]; {
		case slices.Contains(vs, v):
		case len(vs) >= maxIDs:
			ru.more[a.Key]++
		default:
			ru.ids[a.Key] = append(vs, v)
		}
		return true
	})
}

// failure is the error text of a record that may be summarised: a
// warning or an error with an "err" attribute.
func failure(r slog.Record) (string, bool) {
	if r.Level < slog.LevelWarn {
		return "", false
	}
	var text string
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			text, found = a.Value.Resolve().String(), true
			return false
		}
		return true
	})
	return text, found
}

// roundSpan writes a span as people read it: 14s, 2m5s, 350ms.
func roundSpan(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
