package webhooks

import "time"

// Backoff is when a failed delivery is tried again: exponential, with
// jitter, until GiveUpAfter from the event; then the delivery fails.
type Backoff struct {
	// First is the longest wait after the first failed attempt; each
	// failure doubles it, up to Max.
	First time.Duration
	Max   time.Duration
	// GiveUpAfter bounds a delivery's life from its event: an attempt
	// that would come later is not made.
	GiveUpAfter time.Duration
}

// DefaultBackoff waits up to 10 s, 20 s, 40 s, ... up to 2 h between
// attempts, for about a day: a receiver down for minutes gets its events
// within a minute or two of coming back; one down for hours, within two.
var DefaultBackoff = Backoff{First: 10 * time.Second, Max: 2 * time.Hour, GiveUpAfter: 24 * time.Hour}

// Delay is the wait after the attempts-th failed attempt (1 for the
// first), with r in [0, 1) the jitter: between half the exponential step
// and all of it ("equal jitter"), so that receivers coming back are not
// hit by every daemon's retries at once, and the wait still grows.
func (b Backoff) Delay(attempts int, r float64) time.Duration {
	step := b.First
	for i := 1; i < attempts && step < b.Max; i++ {
		step *= 2
	}
	step = min(step, b.Max)
	half := step / 2
	return half + time.Duration(float64(step-half)*r)
}

// Next is when to try a delivery created at created again, after its
// attempts-th failure at now; ok is false when that would be past
// GiveUpAfter: the delivery has failed for good.
func (b Backoff) Next(created, now time.Time, attempts int, r float64) (next time.Time, ok bool) {
	next = now.Add(b.Delay(attempts, r))
	if next.Sub(created) > b.GiveUpAfter {
		return time.Time{}, false
	}
	return next, true
}
