package coordinator

import (
	"context"
	"sync"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Pipelined frames. A turn does not wait for each frame's commit before it
// produces the next: emit hands the frame to the turn's appender and goes
// on. The appender has at most one AppendFrames in flight per turn, and
// every frame queued meanwhile goes in the next one, so a fast turn fills
// its commits instead of paying a commit per frame; the store gives the
// frames their sequences in the order they were queued (one append at a
// time per turn, under the conversation's lock) and streams see a frame
// only after its commit.
//
// The turn waits until its frames are durable (settle) where the protocol
// needs it: before any other write of the turn (a proposal becoming
// confirmable, a decision, the start of a round, the end of the turn with
// its done frame: every write through durable, and finish), before a tool
// runs, and when too many frames or bytes wait. A pipelined append that
// fails is taken over by the owner at its next emit or settle: a transient
// failure is ridden out by durable as any write is (a commit of unknown
// outcome first looked for), a fence stops the owner (lost), anything else
// ends the turn as service_failure. Frames that never committed were never
// streamed, so no client saw what a failure loses.

// maxQueuedFrames and maxQueuedBytes bound what a turn may have waiting
// for the store before emit waits for it: the model is slowed to the
// store's pace instead of frames piling up. Small frames batch by the
// hundred; large ones by a few, because what a commit carries is what its
// frames wait for: a looser bound made large frames wait seconds for no
// more throughput (docs/benchmarks.md, "Throughput near the disk: pipelined
// turns and batched rows").
const (
	maxQueuedFrames = 1024
	maxQueuedBytes  = 64 << 10
)

// payloadBytes is about what p takes in the store: its text, or a fixed
// guess for the small structured payloads.
func payloadBytes(p protocol.Payload) int {
	if t, ok := p.(protocol.TextPayload); ok {
		return len(t.Content) + 64
	}
	return 256
}

// appender carries a turn's frames to the store, one append in flight.
type appender struct {
	write func(ctx context.Context, payloads []protocol.Payload) error
	ctx   func() (context.Context, context.CancelFunc)

	mu     sync.Mutex
	idle   *sync.Cond
	queue  []protocol.Payload // waiting for the next append
	bytes  int                // payloadBytes of queue
	busy   bool               // the append goroutine runs
	err    error              // the failure that stopped the goroutine
	failed []protocol.Payload // what the failed append carried
}

func newAppender(write func(ctx context.Context, payloads []protocol.Payload) error, ctx func() (context.Context, context.CancelFunc)) *appender {
	a := &appender{write: write, ctx: ctx}
	a.idle = sync.NewCond(&a.mu)
	return a
}

// push queues payloads and starts an append if none is in flight; it
// reports whether the queue is within its bounds, false too when a
// failure waits for the owner (nothing is started until it settles).
func (a *appender) push(payloads []protocol.Payload) (ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.queue = append(a.queue, payloads...)
	for _, p := range payloads {
		a.bytes += payloadBytes(p)
	}
	if a.err != nil {
		return false
	}
	if !a.busy {
		a.busy = true
		go a.run()
	}
	return len(a.queue) < maxQueuedFrames && a.bytes < maxQueuedBytes
}

// run appends what is queued, batch after batch, until nothing is left or
// an append fails.
func (a *appender) run() {
	a.mu.Lock()
	for len(a.queue) > 0 {
		batch := a.queue
		a.queue, a.bytes = nil, 0
		a.mu.Unlock()
		ctx, cancel := a.ctx()
		err := a.write(ctx, batch)
		cancel()
		a.mu.Lock()
		if err != nil {
			a.err, a.failed = err, batch
			break
		}
	}
	a.busy = false
	a.idle.Broadcast()
	a.mu.Unlock()
}

// wait returns once no append is in flight, with the failure that stopped
// the appender (if any), the payloads of the failed append and those
// queued after it: none of them is known stored. The appender is reset: it
// starts afresh at the next push.
func (a *appender) wait() (failed, queued []protocol.Payload, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.busy {
		a.idle.Wait()
	}
	err, failed, queued = a.err, a.failed, a.queue
	a.err, a.failed, a.queue, a.bytes = nil, nil, nil, 0
	return failed, queued, err
}

// newAppender is the owner's appender. Its goroutine writes with the
// turn's identity taken now (o.turn is the owner's alone) and with the
// owner's context, fence included, cut loose from its cancel as every
// write of the turn is (durable).
func (o *owner) newAppender() *appender {
	convID, reqID, c, base := o.turn.ConversationID, o.turn.RequestID, o.c, o.ctx
	return newAppender(func(ctx context.Context, payloads []protocol.Payload) error {
		return appendFrames(ctx, c, convID, reqID, payloads)
	}, func() (context.Context, context.CancelFunc) {
		return c.call(context.WithoutCancel(base))
	})
}

// appendFrames is the store write of a turn's frames.
func appendFrames(ctx context.Context, c *Coordinator, convID, reqID string, payloads []protocol.Payload) error {
	frames := make([]store.NewFrame, len(payloads))
	for i, p := range payloads {
		frames[i] = store.NewFrame{Payload: p}
	}
	_, err := c.store.AppendFrames(ctx, store.AppendFramesParams{ConversationID: convID, RequestID: reqID, Frames: frames, Now: c.now()})
	return err
}

// emit queues frames for the turn; a failure of an earlier pipelined
// append ends the turn as service_failure, and a write refused by the fence
// stops the owner (lost).
func (o *owner) emit(payloads ...protocol.Payload) *protocol.Error {
	ok := o.app.push(payloads)
	o.frames += len(payloads)
	if ok {
		return nil
	}
	if err := o.settle(); err != nil {
		return o.frameFailure(err)
	}
	return nil
}

// settle returns once every frame the turn emitted is durable: it waits
// for the append in flight and stores what a failed append left, riding
// out an outage (durable). Its error is the store's: the frames it names
// were never committed.
func (o *owner) settle() error {
	failed, queued, err := o.app.wait()
	if err == nil {
		return nil
	}
	if !store.Transient(err) {
		return err
	}
	if store.IsCommitUnknown(err) {
		// The failed append may have landed: look before writing again, so
		// no frame is written twice.
		var landed bool
		if err := o.durableWrite("append frames", func(ctx context.Context) error {
			var err error
			landed, err = o.framesLanded(ctx, failed)
			return err
		}, nil); err != nil {
			return err
		}
		if landed {
			failed = nil
		}
	}
	unstored := append(failed, queued...)
	if len(unstored) == 0 {
		return nil
	}
	return o.durableWrite("append frames", func(ctx context.Context) error {
		return appendFrames(ctx, o.c, o.turn.ConversationID, o.turn.RequestID, unstored)
	}, func(ctx context.Context) (bool, error) { return o.framesLanded(ctx, unstored) })
}

// frameFailure is how an emit or a settle that failed ends the owner's
// work: lost when the fence refused it, else a service failure.
func (o *owner) frameFailure(err error) *protocol.Error {
	if store.IsFenced(err) {
		o.lost("append frames", err)
	}
	return o.c.serviceError("append frames", err)
}

// durable runs write until it succeeds, fails for good, or the database
// has been unavailable for longer than the outage budget; a cancel of the
// turn or the shutdown's deadline also ends the wait. landed, when set, is
// asked before a retry that follows a commit of unknown outcome: true
// means the first try committed.
//
// The turn's pipelined frames are settled first (appender.go): a write
// comes after every frame the turn emitted before it.
func (o *owner) durable(what string, write func(ctx context.Context) error, landed func(ctx context.Context) (bool, error)) error {
	if err := o.settle(); err != nil {
		return err
	}
	return o.durableWrite(what, write, landed)
}

// durableLeased is durable for a write that starts work (a proposal's
// confirmation): it is not tried, nor tried again, while this daemon
// cannot prove its lease (self-fencing, lifecycle.go); the refusal is the
// error. Only a write whose first try may have committed (its answer was
// lost) is still resolved: it is read again until it is known, the
// decision waiting on it answered at once (lapsed).
func (o *owner) durableLeased(what string, write func(ctx context.Context) error, landed func(ctx context.Context) (bool, error)) error {
	if err := o.settle(); err != nil {
		return err
	}
	return o.durableTry(what, write, landed, true)
}
