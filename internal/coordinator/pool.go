package coordinator

import (
	"sync"
	"time"
)

// pool hands out the workers: the right to talk to the model. Waiters are
// served first come, first served, turns resumed after a proposal decision
// before new ones (a human is waiting on them, and they are already
// accepted). Only new turns count against the queue bound: admission
// control refuses a turn rather than queue it without bound.
type pool struct {
	mu        sync.Mutex
	free      int
	maxQueued int
	queued    int // new turns waiting
	resumed   []*ticket
	fresh     []*ticket
	obs       Observer
	moved     func() // the waiters' positions changed (may be nil)
	// freeSig closes the next time a worker is free (freed).
	freeSig chan struct{}
}

// ticket is one turn's claim on a worker.
type ticket struct {
	granted chan struct{} // closed when the worker is the turn's
	resumed bool
	since   time.Time
	state   ticketState
}

type ticketState int

const (
	ticketWaiting ticketState = iota
	ticketGranted
	ticketDone // left or released
)

func newPool(workers, maxQueued int, obs Observer) *pool {
	return &pool{free: workers, maxQueued: maxQueued, obs: obs}
}

// admit queues a new turn, or refuses it when MaxQueuedTurns wait already.
func (p *pool) admit() (*ticket, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free == 0 && p.queued >= p.maxQueued {
		return nil, false
	}
	return p.enqueueLocked(false), true
}

// resume queues a turn that continues after a decision; never refused.
func (p *pool) resume() *ticket {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enqueueLocked(true)
}

func (p *pool) enqueueLocked(resumed bool) *ticket {
	t := &ticket{granted: make(chan struct{}), resumed: resumed, since: time.Now()}
	if p.free > 0 {
		p.free--
		p.grantLocked(t)
		return t
	}
	if resumed {
		p.resumed = append(p.resumed, t)
	} else {
		p.fresh = append(p.fresh, t)
		p.queued++
		p.obs.QueueChanged(p.queued)
	}
	return t
}

func (p *pool) grantLocked(t *ticket) {
	t.state = ticketGranted
	close(t.granted)
	p.obs.WorkerGranted(WorkerGranted{Wait: time.Since(t.since), Resumed: t.resumed})
}

// done gives the ticket back: a turn that leaves the queue, or a worker
// that is free again (granted to the next waiter).
func (p *pool) done(t *ticket) {
	if t == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch t.state {
	case ticketDone:
		return
	case ticketWaiting:
		t.state = ticketDone
		p.removeLocked(t)
		return
	}
	t.state = ticketDone
	if next := p.nextLocked(); next != nil {
		p.grantLocked(next)
		return
	}
	p.free++
	if p.freeSig != nil {
		close(p.freeSig)
		p.freeSig = nil
	}
}

// idle takes a free worker when no turn here waits for one, for a turn
// claimed from another daemon's queue: such a claim never delays a turn
// accepted here. nil when none is free.
func (p *pool) idle() *ticket {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free == 0 || len(p.resumed)+len(p.fresh) > 0 {
		return nil
	}
	p.free--
	// Not reported as granted: a claim attempt that finds nothing gives the
	// worker back at once, and no turn waited in this queue for it.
	t := &ticket{granted: make(chan struct{}), since: time.Now(), state: ticketGranted}
	close(t.granted)
	return t
}

// freed returns a channel that closes the next time a worker is free.
func (p *pool) freed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freeSig == nil {
		p.freeSig = make(chan struct{})
	}
	return p.freeSig
}

// granted reports whether t no longer waits for a worker.
func (p *pool) granted(t *ticket) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return t.state != ticketWaiting
}

func (p *pool) nextLocked() *ticket {
	if len(p.resumed) > 0 {
		t := p.resumed[0]
		p.resumed = p.resumed[1:]
		p.notifyMoved()
		return t
	}
	if len(p.fresh) > 0 {
		t := p.fresh[0]
		p.fresh = p.fresh[1:]
		p.queued--
		p.obs.QueueChanged(p.queued)
		p.notifyMoved()
		return t
	}
	return nil
}

func (p *pool) notifyMoved() {
	if p.moved != nil {
		p.moved()
	}
}

// position is a waiting ticket's place in line (1 is next): resumed turns
// go first. 0 when it is not waiting.
func (p *pool) position(t *ticket) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.state != ticketWaiting {
		return 0
	}
	for i, w := range p.resumed {
		if w == t {
			return i + 1
		}
	}
	for i, w := range p.fresh {
		if w == t {
			return len(p.resumed) + i + 1
		}
	}
	return 0
}

func (p *pool) removeLocked(t *ticket) {
	q := &p.fresh
	if t.resumed {
		q = &p.resumed
	}
	for i, w := range *q {
		if w == t {
			*q = append((*q)[:i], (*q)[i+1:]...)
			if !t.resumed {
				p.queued--
				p.obs.QueueChanged(p.queued)
			}
			p.notifyMoved()
			return
		}
	}
}

// depth is the number of new turns waiting.
func (p *pool) depth() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queued
}
