// Package testutil holds the helpers the tests of several packages share.
// Only tests import it.
package testutil

import (
	"fmt"
	"time"
)

// Patience is how long Eventually waits before it fails the test. It is a
// safety net that stops a hung test, never a measurement: a condition that
// holds does so long before.
const Patience = 60 * time.Second

// pollEvery is the pause between two looks at the condition.
const pollEvery = 2 * time.Millisecond

// TB is what Eventually needs of a test: testing.TB has it, and so has a
// property test's rapid.T.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Eventually waits until cond holds, looking again every few milliseconds,
// for a state that no signal announces (a row another goroutine writes, a
// line a process logs). After Patience it fails tb with what, formatted as
// fmt.Sprint does. cond runs on the caller's goroutine, so it may call
// tb.Fatal itself for a state that can no longer turn good.
func Eventually(tb TB, cond func() bool, what ...any) {
	tb.Helper()
	eventually(tb, cond, Patience, what...)
}

func eventually(tb TB, cond func() bool, patience time.Duration, what ...any) {
	tb.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			msg := fmt.Sprint(what...)
			if msg == "" {
				msg = "the condition"
			}
			tb.Fatalf("%s: never held in %v", msg, patience)
			return
		}
		time.Sleep(pollEvery)
	}
}
