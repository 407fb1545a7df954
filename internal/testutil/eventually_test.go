package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fatalTB records Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls eventually on a goroutine of its own (Fatalf ends it) and
// returns the failure message, "" when the condition held.
func run(cond func() bool, patience time.Duration, what ...any) string {
	tb := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		eventually(tb, cond, patience, what...)
	}()
	<-done
	return tb.msg
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var looks atomic.Int32
	if msg := run(func() bool { return looks.Add(1) == 3 }, Patience); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if n := looks.Load(); n != 3 {
		t.Fatalf("looked %d times, want 3 (it stops at the first true)", n)
	}
}

func TestEventuallyFailsWithWhatItWaitedFor(t *testing.T) {
	t.Parallel()
	msg := run(func() bool { return false }, 10*time.Millisecond, "turn ", 7, " to end")
	if !strings.HasPrefix(msg, "turn 7 to end: never held") {
		t.Fatalf("message %q", msg)
	}
	if msg := run(func() bool { return false }, time.Millisecond); !strings.HasPrefix(msg, "the condition: never held") {
		t.Fatalf("message without what: %q", msg)
	}
}
