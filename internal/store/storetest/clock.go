// Package storetest is the conformance suite every StateDB backend must pass
// (river's riverdrivertest style): a backend's own test calls Exercise with a
// function that opens a fresh, migrated store. It also holds the helpers the
// suite uses, such as a fake clock, so that backend tests can share them.
package storetest

import (
	"sync"
	"time"
)

// Epoch is the fake clock's default start: a fixed instant with whole
// microseconds, the precision StateDB keeps.
var Epoch = time.Date(2026, time.July, 9, 12, 0, 0, 0, time.UTC)

// Clock is a fake clock. Every Store call of the suite takes its Now from
// one, so no assertion depends on the wall clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock stopped at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
