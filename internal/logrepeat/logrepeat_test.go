package logrepeat

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// buffer is a log destination the test reads while timers write to it.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.b.String()), "\n")
}

func newLogger(opts Options) (*slog.Logger, *Handler, *buffer) {
	var out buffer
	h := New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}), opts)
	return slog.New(h), h, &out
}

// TestOutageIsSummarised: 52 identical failures in 13 s (a loop retrying
// every 250 ms while the database is down, each from another local port)
// are one line and, once they stop, one summary with the count, the span,
// the error and the ids; other lines pass untouched.
func TestOutageIsSummarised(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		log, _, out := newLogger(Options{})
		for i := range 52 {
			err := fmt.Errorf("dial tcp 127.0.0.1:%d->127.0.0.1:5432: connect: connection refused", 40000+i)
			log.Error("claim run failed", "run", fmt.Sprintf("run-%d", i%3), "err", err)
			log.Info("turn accepted", "request", i) // not a failure: always written
			time.Sleep(250 * time.Millisecond)
		}
		time.Sleep(DefaultQuiet + time.Second)
		synctest.Wait()
		var failures, infos []string
		for _, l := range out.lines() {
			if strings.Contains(l, "claim run failed") {
				failures = append(failures, l)
			} else if strings.Contains(l, "turn accepted") {
				infos = append(infos, l)
			}
		}
		if len(infos) != 52 {
			t.Errorf("%d info lines written, want all 52", len(infos))
		}
		if len(failures) != 2 {
			t.Fatalf("the outage wrote %d failure lines, want the first and a summary:\n%s", len(failures), strings.Join(failures, "\n"))
		}
		sum := failures[1]
		for _, want := range []string{`msg="claim run failed (52 times in 12.8s)"`, "repeated=52", "over=12.75", "connection refused",
			"runs=run-1,run-2,run-0"} {
			if !strings.Contains(sum, want) {
				t.Errorf("summary %q lacks %q", sum, want)
			}
		}
		// After the quiet period the next failure is written whole again.
		log.Error("claim run failed", "err", errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
		if n := len(out.lines()); !strings.Contains(out.lines()[n-1], `msg="claim run failed" err=`) {
			t.Errorf("the failure after the quiet period: %q", out.lines()[n-1])
		}
	})
}

// TestDistinctFailuresStayApart: another message, another error, another
// level or a logger with other attributes is another failure; a warning
// without an error is never held back.
func TestDistinctFailuresStayApart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		log, h, out := newLogger(Options{})
		for range 3 {
			log.Warn("lease renewal failed; retrying", "err", "connection refused")
			log.Warn("lease renewal failed; retrying", "err", "the database system is shutting down")
			log.Error("lease renewal failed; retrying", "err", "connection refused")
			log.Warn("claim a queued turn", "err", "connection refused")
			log.With("component", "webhooks").Warn("claim a queued turn", "err", "connection refused")
			log.Warn("a daemon's lease expired: taking its work over", "instance", "i1")
		}
		if n := len(out.lines()); n != 5+3 {
			t.Errorf("wrote %d lines before the summaries, want 5 first lines and 3 warnings without an error:\n%s", n, strings.Join(out.lines(), "\n"))
		}
		h.Flush() // at shutdown: the runs still open are summarised
		summaries := 0
		for _, l := range out.lines() {
			if strings.Contains(l, "(3 times in") {
				summaries++
			}
		}
		if summaries != 5 {
			t.Errorf("%d summaries after Flush, want 5:\n%s", summaries, strings.Join(out.lines(), "\n"))
		}
	})
}

// TestLongOutageSummarisedEveryWindow: a failure that goes on is
// summarised every MaxWindow, not only when it stops.
func TestLongOutageSummarisedEveryWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		log, _, out := newLogger(Options{Quiet: 5 * time.Second, MaxWindow: time.Minute})
		for range 3 * 60 {
			log.Error("scheduler pass", "err", "connection refused")
			time.Sleep(time.Second)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		lines := out.lines()
		if len(lines) != 4 {
			t.Fatalf("three minutes of failures wrote %d lines, want the first and a summary a minute:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		for _, l := range lines[1:] {
			if !strings.Contains(l, "times in 1m0s)") && !strings.Contains(l, "times in 59s)") && !strings.Contains(l, "times in 58s)") {
				t.Errorf("summary %q does not cover about a minute", l)
			}
		}
	})
}
