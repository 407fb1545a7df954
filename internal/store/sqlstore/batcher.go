package sqlstore

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"
)

// The hand-over both writer loops share: group commit's (group.go) and the
// batched appends' (lockedappends.go). A caller submits a job and waits;
// a loop takes the first job waiting and every other waiting at that
// moment, and answers each job of the batch once. What a batch does is
// the loop's own.

// errClosed answers a job that arrives after close, and one still waiting
// when the loops stop.
var errClosed = errors.New("store closed")

// answer is what every job of a batcher carries: its caller's context,
// when it was handed over, and its answer.
type answer struct {
	ctx      context.Context
	enqueued time.Time // when submit handed it to the loops
	err      error
	done     chan struct{}
}

// finish answers the job; a loop calls it once per job.
func (a *answer) finish(err error) {
	a.err = err
	close(a.done)
}

// batchJob is a job of a batcher: a pointer to a type that embeds answer.
type batchJob interface{ answered() *answer }

func (a *answer) answered() *answer { return a }

// batcher hands jobs to writer loops in batches.
type batcher[J batchJob] struct {
	max   int
	queue chan J
	// yields bounds how often gather yields the processor for the jobs
	// about to arrive (negative: while yielding brings more).
	yields int
	// first, when set, runs when a loop has taken a batch's first job,
	// before it takes the others that wait.
	first func(J)
	run   func(batch []J) // answers every job of the batch

	mu     sync.RWMutex // closed, against a send racing close
	closed bool
	quit   chan struct{}
	wg     sync.WaitGroup
}

// batcherParams configure a batcher.
type batcherParams[J batchJob] struct {
	Max    int // jobs in a batch (default DefaultMaxBatch)
	Loops  int // writer loops (default 1)
	Yields int
	First  func(J)
	Run    func(batch []J)
}

func newBatcher[J batchJob](p batcherParams[J]) *batcher[J] {
	if p.Max <= 0 {
		p.Max = DefaultMaxBatch
	}
	if p.Loops <= 0 {
		p.Loops = 1
	}
	b := &batcher[J]{max: p.Max, queue: make(chan J, p.Max), yields: p.Yields, first: p.First, run: p.Run, quit: make(chan struct{})}
	b.wg.Add(p.Loops)
	for range p.Loops {
		go b.loop()
	}
	return b
}

// submit hands j to the loops and returns its answer, once its batch is
// done. A job handed over is always answered by its batch: the caller's
// cancellation after that does not cut the wait short (the loop skips a
// job whose context ended before its turn).
func (b *batcher[J]) submit(ctx context.Context, j J) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a := j.answered()
	a.ctx, a.done, a.enqueued = ctx, make(chan struct{}), time.Now()
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return errClosed
	}
	select {
	case b.queue <- j:
	case <-ctx.Done():
		b.mu.RUnlock()
		return ctx.Err()
	}
	b.mu.RUnlock()
	<-a.done
	return a.err
}

// close stops the loops after the batches they are running; jobs still
// waiting fail with errClosed. The call that stops them returns true, once
// they have stopped; any later call returns false at once.
func (b *batcher[J]) close() bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.closed = true // no send starts after this: the queue only drains
	b.mu.Unlock()
	close(b.quit)
	b.wg.Wait()
	for {
		select {
		case j := <-b.queue:
			j.answered().finish(errClosed)
		default:
			return true
		}
	}
}

// waiting is the jobs handed over and not yet taken by a loop.
func (b *batcher[J]) waiting() int { return len(b.queue) }

func (b *batcher[J]) loop() {
	defer b.wg.Done()
	batch := make([]J, 0, b.max)
	for {
		select {
		case j := <-b.queue:
			batch = append(batch[:0], j)
		case <-b.quit:
			return
		}
		if b.first != nil {
			b.first(batch[0])
		}
		b.run(b.gather(batch))
	}
}

// gather adds the jobs waiting, then yields the processor and adds those
// that came meanwhile: the callers the last batch answered are runnable,
// each about to submit its next job, and would otherwise trickle in behind
// the loop, a batch (and a commit) for each handful.
func (b *batcher[J]) gather(batch []J) []J {
	batch = b.drain(batch)
	for i := 0; len(batch) < b.max && (b.yields < 0 || i < b.yields); i++ {
		runtime.Gosched()
		if len(b.queue) == 0 {
			break
		}
		batch = b.drain(batch)
	}
	return batch
}

// drain adds the jobs waiting, up to the batch's bound.
func (b *batcher[J]) drain(batch []J) []J {
	for len(batch) < b.max {
		select {
		case j := <-b.queue:
			batch = append(batch, j)
		default:
			return batch
		}
	}
	return batch
}
