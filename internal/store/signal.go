package store

import "sync"

// Signals wakes stream readers after commits, per conversation, without
// polling: Wait hands out a channel that the next Notify for that key closes.
// Backends embed it and call Notify after each commit that appends frames.
type Signals struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

// Wait returns a channel closed by the next Notify(key).
func (s *Signals) Wait(key string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting == nil {
		s.waiting = make(map[string]chan struct{})
	}
	ch, ok := s.waiting[key]
	if !ok {
		ch = make(chan struct{})
		s.waiting[key] = ch
	}
	return ch
}

// Notify wakes everyone waiting on key.
func (s *Signals) Notify(key string) {
	s.mu.Lock()
	ch, ok := s.waiting[key]
	delete(s.waiting, key)
	s.mu.Unlock()
	if ok {
		close(ch)
	}
}

// NotifyAll wakes every waiter: for a backend that may have missed commits
// (a PostgreSQL listener that lost its connection). A woken reader re-reads
// its frames, so waking it without a new frame is harmless.
func (s *Signals) NotifyAll() {
	s.mu.Lock()
	waiting := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	for _, ch := range waiting {
		close(ch)
	}
}
