package coordinator_test

import (
	"slices"
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
)

// BenchmarkQueuedTurnsBehindHungProviders measures whether turns queued
// behind hung model calls starve: 2 workers, 4 turns whose model never
// answers submitted first, then 8 ordinary turns, each in its own
// conversation. The deadlines (first event 100 ms here, 2 retries) end each
// hung attempt, so every hung turn gives its worker back after about
// 3 × 100 ms plus backoff, and the ordinary turns run. Reported: the median
// and the worst time from an ordinary turn's submission to its done, and
// how long the hung turns held a worker in all.
func BenchmarkQueuedTurnsBehindHungProviders(b *testing.B) {
	obs := &recorder{}
	e := newEngine(b, engineOpts{provider: planProvider{}, workers: 2, tweak: func(c *coordinator.Config) {
		c.Observer = obs
		c.FirstEventTimeout, c.IdleTimeout, c.AttemptTimeout = 100*time.Millisecond, 100*time.Millisecond, time.Second
		c.ModelRetries, c.RetryBackoff, c.MaxRetryBackoff = 2, 10*time.Millisecond, 20*time.Millisecond
		c.TextFlush = 50 * time.Millisecond
	}})
	hung, ordinary := map[string]bool{}, map[string]bool{}
	for b.Loop() {
		var subs []protocol.TurnAccepted
		for i := range 12 {
			c := e.conversation()
			instruction := "plan:T"
			if i < 4 {
				instruction = "plan:H"
			}
			acc := e.submit(c, instruction)
			subs = append(subs, acc)
			if i < 4 {
				hung[acc.RequestID] = true
			} else {
				ordinary[acc.RequestID] = true
			}
		}
		for _, acc := range subs {
			e.waitDone(acc.ConversationID, acc.RequestID)
		}
	}
	// The durations from acceptance to the durable done, as the observer
	// measured them (the turn's owner starts at acceptance).
	var waits []time.Duration
	var hungTotal time.Duration
	for _, te := range obs.turns() {
		switch {
		case ordinary[te.RequestID]:
			waits = append(waits, te.Duration)
		case hung[te.RequestID]:
			hungTotal += te.Duration
		}
	}
	slices.Sort(waits)
	b.ReportMetric(float64(waits[len(waits)/2].Milliseconds()), "p50-wait-ms")
	b.ReportMetric(float64(waits[len(waits)-1].Milliseconds()), "max-wait-ms")
	b.ReportMetric(float64(hungTotal.Milliseconds())/float64(len(hung)), "hung-turn-ms")
}
