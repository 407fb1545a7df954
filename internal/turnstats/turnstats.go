// Package turnstats keeps the operator's recent turn ends and model
// failures in memory, a ring each, for the System space's charts
// (GET /api/app/system/operator). A Ring is a coordinator.Observer: compose
// it with others (Prometheus metrics) with coordinator.Observers. Nothing is
// stored: a restart starts the picture afresh.
package turnstats

import (
	"slices"
	"sync"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
)

// Ring keeps the newest turn ends and model failures the coordinator
// reports; its zero value is not usable (New).
type Ring struct {
	coordinator.NopObserver
	now func() time.Time

	mu       sync.Mutex
	turns    ring[turnPoint]
	failures ring[failurePoint]
}

type turnPoint struct {
	at        time.Time
	duration  time.Duration
	recovered bool // no duration: it spans a restart
	outcome   protocol.Outcome
	code      protocol.ErrorCode
}

type failurePoint struct {
	at      time.Time
	code    protocol.ErrorCode
	retried bool
}

// ring is a fixed-size buffer of the newest items.
type ring[T any] struct {
	items []T
	next  int
	full  bool
}

func (r *ring[T]) add(v T) {
	if !r.full && len(r.items) < cap(r.items) {
		r.items = append(r.items, v)
		r.full = len(r.items) == cap(r.items)
		return
	}
	r.items[r.next] = v
	r.next = (r.next + 1) % len(r.items)
}

// each calls fn oldest first.
func (r *ring[T]) each(fn func(T)) {
	for i := range r.items {
		fn(r.items[(r.next+i)%len(r.items)])
	}
}

// New keeps the newest size turn ends and size model failures; now is the
// clock (nil: time.Now).
func New(size int, now func() time.Time) *Ring {
	if now == nil {
		now = time.Now
	}
	if size < 1 {
		size = 1
	}
	return &Ring{now: now, turns: ring[turnPoint]{items: make([]turnPoint, 0, size)},
		failures: ring[failurePoint]{items: make([]failurePoint, 0, size)}}
}

// TurnEnded implements coordinator.Observer.
func (r *Ring) TurnEnded(e coordinator.TurnEnded) {
	r.mu.Lock()
	r.turns.add(turnPoint{at: r.now(), duration: e.Duration, outcome: e.Outcome, code: e.ErrorCode, recovered: e.Recovered})
	r.mu.Unlock()
}

// ModelAttempt implements coordinator.Observer: failures only.
func (r *Ring) ModelAttempt(a coordinator.ModelAttempt) {
	if a.ErrorCode == "" {
		return
	}
	r.mu.Lock()
	r.failures.add(failurePoint{at: r.now(), code: a.ErrorCode, retried: a.Retried})
	r.mu.Unlock()
}

// Activity summarises the last n intervals of width step.
func (r *Ring) Activity(n int, step time.Duration) protocol.OperatorActivity {
	until := r.now()
	since := until.Add(-time.Duration(n) * step)
	out := protocol.OperatorActivity{Since: protocol.Timestamp(since), Until: protocol.Timestamp(until)}
	durations := make([][]time.Duration, n)
	out.Buckets = make([]protocol.OperatorBucket, n)
	for i := range out.Buckets {
		s := since.Add(time.Duration(i) * step)
		out.Buckets[i] = protocol.OperatorBucket{Start: protocol.Timestamp(s), End: protocol.Timestamp(s.Add(step)), ModelErrors: map[string]int{}}
	}
	index := func(at time.Time) int {
		if at.Before(since) || !at.Before(until.Add(time.Nanosecond)) {
			return -1
		}
		return min(int(at.Sub(since)/step), n-1)
	}
	r.mu.Lock()
	out.Kept.Turns, out.Kept.Failures = len(r.turns.items), len(r.failures.items)
	r.turns.each(func(p turnPoint) {
		if i := index(p.at); i >= 0 {
			b := &out.Buckets[i]
			b.Turns++
			if p.outcome != protocol.OutcomeCompleted {
				b.Failed++
			}
			if !p.recovered {
				durations[i] = append(durations[i], p.duration)
			}
		}
	})
	r.failures.each(func(p failurePoint) {
		if i := index(p.at); i >= 0 {
			out.Buckets[i].ModelErrors[string(p.code)]++
		}
	})
	r.mu.Unlock()
	for i, ds := range durations {
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		med, mx := ds[len(ds)/2].Milliseconds(), ds[len(ds)-1].Milliseconds()
		out.Buckets[i].MedianMs, out.Buckets[i].MaxMs = &med, &mx
	}
	return out
}
