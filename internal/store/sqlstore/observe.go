package sqlstore

import "time"

// Observer is told how the store's work goes, for metrics: the duration
// of every store operation (an exported method of Store: one call, its
// retries and its wait for the writer included) and, under group commit,
// each batch's size and how long each of its transactions waited for the
// writer loop. Its methods must return quickly.
type Observer interface {
	StoreOperation(op string, d time.Duration)
	WriterBatch(size int)
	WriterQueueWait(d time.Duration)
}

// observerBox holds an Observer for an atomic.Pointer.
type observerBox struct{ Observer }

// Observe sends the store's timings to o from now on (nil: to nobody).
func (s *Store) Observe(o Observer) {
	if o == nil {
		s.obs.Store(nil)
		return
	}
	s.obs.Store(&observerBox{o})
}

func (s *Store) observer() Observer {
	if b := s.obs.Load(); b != nil {
		return b.Observer
	}
	return nil
}

// timed records an operation that began at start: defer s.timed(op, time.Now()).
func (s *Store) timed(op string, start time.Time) {
	if o := s.observer(); o != nil {
		o.StoreOperation(op, time.Since(start))
	}
}

// WriterOldestWait is how long the oldest write transaction not yet
// committed has waited since it was handed to the group-commit writer: 0
// when none waits, or without group commit. A writer stuck on its disk
// shows here before any batch finishes to report it.
func (s *Store) WriterOldestWait() time.Duration {
	if s.group == nil {
		return 0
	}
	since := s.group.oldest.Load()
	if since == 0 {
		return 0
	}
	return max(time.Since(time.Unix(0, since)), 0)
}
