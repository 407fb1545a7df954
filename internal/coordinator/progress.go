package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Turn progress (protocol.TurnProgress): what an active turn is doing now —
// queued (with its place in the queue), working, retrying in N s, waiting
// for a human's decision, executing a confirmed command. The turn's owner
// is the one that knows, so it reports each change (report); readers (GET
// conversation, the stream's status comment) take a copy and wake on
// ProgressSignal. Progress is not a frame: it is never stored, and a turn
// owned by another daemon shows what its stored status says, read again
// when its frames may have moved it (ActiveTurnAfter).

// progress is an owner's last report. The owner writes it; any goroutine
// reads it.
type progress struct {
	mu     sync.Mutex
	v      protocol.TurnProgress
	ticket *ticket               // while queued: the queue position is read from the pool
	saved  protocol.TurnProgress // what a database outage interrupted (durable.go)
}

// report records the turn's new state and wakes the conversation's readers.
// Only the owner calls it (or startOwner, before the owner runs).
func (o *owner) report(state protocol.ProgressState, set func(*protocol.TurnProgress)) {
	o.prog.mu.Lock()
	o.prog.v = protocol.TurnProgress{RequestID: o.turn.RequestID, State: state, Since: protocol.Timestamp(o.c.now())}
	o.prog.ticket = nil
	if state == protocol.ProgressQueued {
		o.prog.ticket = o.slot
	}
	if set != nil {
		set(&o.prog.v)
	}
	o.prog.mu.Unlock()
	o.c.progressed.Notify(o.turn.ConversationID)
}

// reportRetry: the model attempt failed and the next one starts after wait.
func (o *owner) reportRetry(next int, code protocol.ErrorCode, wait time.Duration) {
	o.report(protocol.ProgressRetrying, func(p *protocol.TurnProgress) {
		p.Attempt, p.ErrorCode, p.RetryAt = next, code, protocol.Timestamp(o.c.now().Add(wait))
	})
}

func (o *owner) progressView() protocol.TurnProgress {
	o.prog.mu.Lock()
	v, t := o.prog.v, o.prog.ticket
	o.prog.mu.Unlock()
	if t != nil {
		v.QueuePosition = o.c.pool.position(t)
	}
	return v
}

// ProgressSignal is closed at the next change of progress of the
// conversation's active turn in this process (or of the queue's order).
func (c *Coordinator) ProgressSignal(convID string) <-chan struct{} { return c.progressed.Wait(convID) }

// ActiveTurn is the progress of the conversation's active turn, nil when
// none runs. A turn this process owns reports its own state; another's is
// read from the store (queued, working or awaiting_confirmation).
func (c *Coordinator) ActiveTurn(ctx context.Context, convID string) (*protocol.TurnProgress, error) {
	if p := c.ownedProgress(convID); p != nil {
		return c.withLine(ctx, p, convID, false), nil
	}
	conv, err := c.conversation(ctx, convID)
	if err != nil {
		return nil, err
	}
	p, err := c.storedProgress(ctx, conv)
	return c.withLine(ctx, p, convID, false), err
}

// ActiveTurnAfter is ActiveTurn for a reader that has seen the
// conversation's frames through sequence after. A turn another daemon owns
// is read from the store once for all such readers: every stream of the
// conversation on this daemon asks at the same frame, and the first read
// answers the others, as one read of the feed serves them all.
func (c *Coordinator) ActiveTurnAfter(ctx context.Context, convID string, after int64) (*protocol.TurnProgress, error) {
	if p := c.ownedProgress(convID); p != nil {
		return c.withLine(ctx, p, convID, false), nil
	}
	e := c.stored.entry(convID)
	e.mu.Lock() // the others wait for the read under way, then share it
	defer e.mu.Unlock()
	if e.read && e.seq >= after {
		return e.view(), nil
	}
	conv, err := c.conversation(ctx, convID)
	if err != nil {
		return nil, err
	}
	p, err := c.storedProgress(ctx, conv)
	if err != nil {
		return nil, err
	}
	// Frames moved: the line may have too (a done made the first waiting
	// turn active).
	e.read, e.seq, e.p = true, conv.LastSequence(), c.withLine(ctx, p, convID, true)
	return e.view(), nil
}

// storedViews are the last stored progress read per conversation, for
// ActiveTurnAfter.
type storedViews struct {
	mu sync.Mutex
	m  map[string]*storedView
}

// maxStoredViews bounds the conversations remembered; past it the map
// starts afresh (an entry only saves a read).
const maxStoredViews = 4096

type storedView struct {
	mu   sync.Mutex // held for the read
	read bool
	seq  int64 // the conversation's last sequence as of the read
	p    *protocol.TurnProgress
}

func (v *storedViews) entry(convID string) *storedView {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= maxStoredViews {
		v.m = make(map[string]*storedView)
	}
	e := v.m[convID]
	if e == nil {
		e = &storedView{}
		v.m[convID] = e
	}
	return e
}

func (e *storedView) view() *protocol.TurnProgress {
	if e.p == nil {
		return nil
	}
	p := *e.p
	p.Waiting = append([]protocol.WaitingTurn(nil), p.Waiting...)
	return &p
}

// activeTurn is ActiveTurn for a conversation already read.
func (c *Coordinator) activeTurn(ctx context.Context, conv store.Conversation) *protocol.TurnProgress {
	if conv.ActiveRequestID == nil {
		return nil
	}
	if p := c.ownedProgress(conv.ID); p != nil {
		return c.withLine(ctx, p, conv.ID, false)
	}
	p, err := c.storedProgress(ctx, conv)
	if err != nil {
		return nil // progress is a courtesy: the page stands without it
	}
	return c.withLine(ctx, p, conv.ID, false)
}

func (c *Coordinator) ownedProgress(convID string) *protocol.TurnProgress {
	c.mu.Lock()
	var own *owner
	for _, o := range c.owners {
		if o.convID == convID {
			own = o
			break
		}
	}
	c.mu.Unlock()
	if own == nil {
		return nil
	}
	v := own.progressView()
	if v.State == "" { // registered, not reported yet
		return nil
	}
	return &v
}

func (c *Coordinator) storedProgress(ctx context.Context, conv store.Conversation) (*protocol.TurnProgress, error) {
	if conv.ActiveRequestID == nil {
		return nil, nil
	}
	t, err := c.store.GetTurn(ctx, *conv.ActiveRequestID)
	if err != nil {
		return nil, err
	}
	p := &protocol.TurnProgress{RequestID: t.RequestID, Since: protocol.Timestamp(t.CreatedAt)}
	switch t.Status {
	case store.TurnQueued:
		p.State = protocol.ProgressQueued
	case store.TurnRunning:
		p.State = protocol.ProgressWorking
		if t.StartedAt != nil {
			p.Since = protocol.Timestamp(*t.StartedAt)
		}
	case store.TurnAwaitingConfirmation:
		p.State = protocol.ProgressAwaitingConfirmation
	default:
		return nil, nil
	}
	return p, nil
}

// TurnProgress is the progress of the active turn of conv, as just read,
// for a conversation's page: nil when none runs or it cannot be read.
func (c *Coordinator) TurnProgress(ctx context.Context, conv store.Conversation) *protocol.TurnProgress {
	return c.activeTurn(ctx, conv)
}
