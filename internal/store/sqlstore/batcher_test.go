package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/studio/operator/internal/testutil"
)

// testJob is a batcher job that asks for a number; the test's batches
// answer each with its own.
type testJob struct {
	answer
	n   int
	got int
}

// echo is a batch that answers every job with its own number, or fails the
// whole batch when fail says so.
func echo(fail func(batch []*testJob) error) func([]*testJob) {
	return func(batch []*testJob) {
		var err error
		if fail != nil {
			err = fail(batch)
		}
		for _, j := range batch {
			if err == nil {
				j.got = j.n
			}
			j.finish(err)
		}
	}
}

func TestBatcherAnswersEachSubmitterItsOwn(t *testing.T) {
	for _, loops := range []int{1, 4} {
		t.Run(fmt.Sprint(loops, "loops"), func(t *testing.T) {
			var mu sync.Mutex
			sizes := map[int]int{}
			b := newBatcher(batcherParams[*testJob]{Max: 8, Loops: loops, Yields: -1, Run: echo(func(batch []*testJob) error {
				mu.Lock()
				sizes[len(batch)]++
				mu.Unlock()
				return nil
			})})
			defer b.close()
			const n = 400
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					j := &testJob{n: i}
					if err := b.submit(context.Background(), j); err != nil {
						errs <- err
						return
					}
					if j.got != i {
						errs <- fmt.Errorf("submitter %d got %d", i, j.got)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for size := range sizes {
				if size < 1 || size > 8 {
					t.Errorf("a batch of %d jobs, bound 8", size)
				}
			}
		})
	}
}

func TestBatcherFailedBatchFailsEachSubmitter(t *testing.T) {
	cause := errors.New("commit: disk full")
	release := make(chan struct{})
	b := newBatcher(batcherParams[*testJob]{Max: 16, Yields: 1,
		First: func(*testJob) { <-release }, // the others queue behind the first
		Run:   echo(func([]*testJob) error { return cause })})
	defer b.close()
	const n = 5
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- b.submit(context.Background(), &testJob{n: i}) }()
	}
	testutil.Eventually(t, func() bool { return b.waiting() == n-1 }, "the others queue behind the first")
	close(release)
	for range n {
		if err := <-errs; !errors.Is(err, cause) {
			t.Errorf("a submitter of the failed batch got %v, want %v", err, cause)
		}
	}
}

func TestBatcherSubmitAfterCloseIsClosed(t *testing.T) {
	b := newBatcher(batcherParams[*testJob]{Run: echo(nil)})
	if !b.close() {
		t.Fatal("the first close did not stop the loops")
	}
	if b.close() {
		t.Error("a second close stopped them again")
	}
	if err := submitOrHang(t, b); !errors.Is(err, errClosed) {
		t.Fatalf("submit after close: %v, want errClosed", err)
	}
}

// submitOrHang submits a job and returns its answer, failing the test if
// none comes (a job no loop will ever answer).
func submitOrHang(t *testing.T, b *batcher[*testJob]) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- b.submit(context.Background(), &testJob{}) }()
	testutil.Eventually(t, func() bool { return len(errc) == 1 }, "submit's answer")
	return <-errc
}

// Close while submitters race it: the loops are held on their first jobs,
// the queue is full and more submitters wait to hand theirs over when
// close starts. Each submitter is answered, by its batch or with
// errClosed; none waits for ever, none is answered twice (finish would
// panic on the closed channel), and close returns.
func TestBatcherCloseWhileSubmitting(t *testing.T) {
	var answered, closed int
	for round := range 20 {
		release := make(chan struct{})
		b := newBatcher(batcherParams[*testJob]{Max: 4, Loops: 2, Yields: -1,
			First: func(*testJob) { <-release }, Run: echo(nil)})
		const n = 64
		var mu sync.Mutex
		done := 0
		for i := range n {
			go func() {
				j := &testJob{n: i}
				err := b.submit(context.Background(), j)
				mu.Lock()
				defer mu.Unlock()
				done++
				switch {
				case err == nil && j.got == i:
					answered++
				case errors.Is(err, errClosed):
					closed++
				default:
					t.Errorf("round %d: submitter %d: err %v, got %d", round, i, err, j.got)
				}
			}()
		}
		testutil.Eventually(t, func() bool { return b.waiting() == 4 }, "a full queue")
		closing := make(chan bool)
		go func() { closing <- b.close() }()
		close(release)
		testutil.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return done == n
		}, "every submitter answered")
		if !<-closing {
			t.Fatal("close did not stop the loops")
		}
		if err := submitOrHang(t, b); !errors.Is(err, errClosed) {
			t.Fatalf("round %d: submit after close: %v", round, err)
		}
	}
	if answered == 0 || closed == 0 {
		t.Errorf("%d answered, %d closed: the rounds did not race close", answered, closed)
	}
}

// Close while a job waits in the queue and the loop, busy, sees the quit
// and the job together: it stops, and close answers the job errClosed
// (the loop picks one at random, so over the rounds both happen).
func TestBatcherCloseAnswersTheQueued(t *testing.T) {
	queuedClosed := 0
	for range 40 {
		release := make(chan struct{})
		took := make(chan struct{}, 2)
		b := newBatcher(batcherParams[*testJob]{Max: 1, First: func(*testJob) { took <- struct{}{}; <-release }, Run: echo(nil)})
		held, queued := make(chan error, 1), make(chan error, 1)
		go func() { held <- b.submit(context.Background(), &testJob{n: 1}) }()
		<-took
		go func() { queued <- b.submit(context.Background(), &testJob{n: 2}) }()
		testutil.Eventually(t, func() bool { return b.waiting() == 1 }, "the second job queued")
		closing := make(chan bool)
		go func() { closing <- b.close() }()
		testutil.Eventually(t, func() bool {
			select {
			case <-b.quit:
				return true
			default:
				return false
			}
		}, "close told the loop to quit")
		close(release)
		if err := <-held; err != nil {
			t.Fatalf("the held job: %v", err)
		}
		testutil.Eventually(t, func() bool { return len(queued) == 1 }, "the queued job answered")
		switch err := <-queued; {
		case errors.Is(err, errClosed):
			queuedClosed++
		case err != nil:
			t.Fatalf("the queued job: %v", err)
		}
		<-closing
	}
	if queuedClosed == 0 {
		t.Error("the loop never stopped with a job queued: close's answer to it went untested")
	}
}

// A caller whose context ends while it waits to hand its job over returns
// its context's error; the job never reaches a batch.
func TestBatcherSubmitCancelledBeforeHandOver(t *testing.T) {
	release := make(chan struct{})
	took := make(chan struct{}, 4)
	ran := make(chan int, 4)
	b := newBatcher(batcherParams[*testJob]{Max: 1, // a queue of one
		First: func(*testJob) { took <- struct{}{}; <-release },
		Run: func(batch []*testJob) {
			for _, j := range batch {
				ran <- j.n
			}
			echo(nil)(batch)
		}})
	defer b.close()
	first := make(chan error, 1)
	go func() { first <- b.submit(context.Background(), &testJob{n: 1}) }()
	<-took // the loop holds the first job
	second := make(chan error, 1)
	go func() { second <- b.submit(context.Background(), &testJob{n: 2}) }() // fills the queue
	testutil.Eventually(t, func() bool { return b.waiting() == 1 }, "the second job waits in the queue")
	ctx, cancel := context.WithCancel(context.Background())
	third := make(chan error, 1)
	go func() { third <- b.submit(ctx, &testJob{n: 3}) }()
	cancel()
	if err := <-third; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled submit: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	close(ran)
	for n := range ran {
		if n == 3 {
			t.Error("the cancelled job reached a batch")
		}
	}
}
