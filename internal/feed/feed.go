// Package feed hands committed frames to this process's live streams from
// memory: a window of each streamed conversation's newest frames, encoded
// once as Server-Sent Events and shared by all its streams
// (docs/design.md §11). It depends on the protocol alone; a store
// publishes to it after each commit.
package feed

import (
	"context"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// Feed hands committed frames to this process's live streams from memory
// (docs/design.md §11). A backend publishes the frames of each commit after the
// commit returns (never before: a frame is durable before any stream sees
// it). Each frame is encoded once, as its Server-Sent Event, into a
// window of the conversation's newest frames that all its streams share.
//
// A stream reads the store only to replay, and when it has fallen behind
// the window: the window is bounded (Window frames, WindowBytes),
// nothing is queued per stream beyond a one-slot wake-up, and a slow
// stream never holds up a commit or another stream. Only conversations
// with a stream keep a window.
//
// Commits of other processes (PostgreSQL) reach the feed through Refresh:
// one read of the store per wake-up and conversation, whatever the number
// of streams.
type Feed struct {
	read   ReadFunc
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // refreshes

	mu    sync.Mutex
	convs map[string]*feedConv
}

// The window a conversation with streams keeps: its newest frames, at most
// Window of them (a power of two) and WindowBytes of events.
const (
	Window      = 512
	WindowBytes = 1 << 20
)

// firstRing is the slots of a window's ring at its first publish; it
// doubles as the window holds more, up to Window. A full ring is 36 KiB
// of pointers the collector scans at every cycle: allocated whole for each
// streamed conversation, 1 000 of them were half the daemon's live heap
// with a few dozen frames each, and every mark phase the longer for it
// (docs/benchmarks.md, the tail).
const firstRing = 16

// Event is a committed frame as its Server-Sent Event, shared by every
// stream that writes it: never modify SSE.
type Event struct {
	Sequence int64
	Type     protocol.FrameType
	SSE      []byte
	// CreatedAt is the frame's createdAt, kept beside its encoding so that
	// a stream timing its deliveries does not parse it back per stream.
	CreatedAt time.Time
}

// refreshPage is how many frames one read of Refresh takes.
const refreshPage = 500

// ReadFunc reads up to limit of a conversation's committed frames after a
// sequence from the store.
type ReadFunc func(ctx context.Context, conversationID string, after int64, limit int) ([]protocol.RawFrame, error)

// New returns a feed. read, which Refresh needs, reads the store; nil for
// a backend that no other process writes.
func New(read ReadFunc) *Feed {
	ctx, cancel := context.WithCancel(context.Background())
	return &Feed{read: read, ctx: ctx, cancel: cancel, convs: make(map[string]*feedConv)}
}

// feedConv is a conversation's window and streams.
type feedConv struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
	// ring holds the events of sequences first..last at seq % len(ring)
	// (a power of two, at most Window); last < first: none. Allocated at
	// the first publish, grown as the window holds more (put).
	ring        []Event
	first, last int64
	bytes       int
	// tail is the highest cursor a stream has asked from: where a refresh
	// reads from when the window holds nothing.
	tail       int64
	refreshing bool
	again      bool
	// gone: the conversation was removed (a purge); its streams end.
	gone bool
}

func (c *feedConv) empty() bool { return c.last < c.first }

// put adds events in sequence order. An event the window already covers
// is skipped; one that does not follow the window's last starts the
// window over (another commit's frames are missing in between: the
// streams that need them read them from the store).
func (c *feedConv) put(events []Event) {
	if c.ring == nil {
		c.ring = make([]Event, firstRing)
	}
	for _, e := range events {
		if !c.empty() {
			if e.Sequence <= c.last {
				continue
			}
			if e.Sequence != c.last+1 {
				c.clear()
			}
		}
		if c.empty() {
			c.first, c.last = e.Sequence, e.Sequence-1
		}
		if held := c.last - c.first + 1; held == Window {
			c.drop()
		} else if held == int64(len(c.ring)) {
			c.grow()
		}
		c.ring[c.slot(e.Sequence)] = e
		c.last = e.Sequence
		c.bytes += len(e.SSE)
		for c.bytes > WindowBytes && c.first < c.last {
			c.drop()
		}
	}
}

// slot is where seq's event is in the ring.
func (c *feedConv) slot(seq int64) int64 { return seq & int64(len(c.ring)-1) }

// grow doubles the ring, its events moved to their slots in the new one.
func (c *feedConv) grow() {
	ring := make([]Event, 2*len(c.ring))
	for seq := c.first; seq <= c.last; seq++ {
		ring[seq&int64(len(ring)-1)] = c.ring[c.slot(seq)]
	}
	c.ring = ring
}

// drop forgets the window's oldest event.
func (c *feedConv) drop() {
	slot := &c.ring[c.slot(c.first)]
	c.bytes -= len(slot.SSE)
	*slot = Event{}
	c.first++
}

func (c *feedConv) clear() {
	for !c.empty() {
		c.drop()
	}
	c.first, c.last, c.bytes = 1, 0, 0
}

func (c *feedConv) wakeAll() {
	for s := range c.subs {
		select {
		case s.ready <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// Gone tells the streams of a conversation that was removed (a purge of
// it, with its frames) that nothing more will come: Subscription.Gone
// reports it and Ready fires. Streams of another process learn it when
// they next read the store.
func (f *Feed) Gone(conversationID string) {
	f.mu.Lock()
	c := f.convs[conversationID]
	f.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	c.gone = true
	c.clear()
	c.wakeAll()
	c.mu.Unlock()
}

// Gone reports that the conversation was removed while subscribed.
func (s *Subscription) Gone() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.gone
}

// Subscription is one stream's place in a conversation's feed.
type Subscription struct {
	feed  *Feed
	id    string
	c     *feedConv
	ready chan struct{}
}

// Subscribe starts following a conversation's commits. Subscribe before
// reading the store: a frame committed after the read is then in the
// window or announced by Ready.
func (f *Feed) Subscribe(conversationID string) *Subscription {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.convs[conversationID]
	if c == nil {
		c = &feedConv{subs: make(map[*Subscription]struct{}), first: 1}
		f.convs[conversationID] = c
	}
	s := &Subscription{feed: f, id: conversationID, c: c, ready: make(chan struct{}, 1)}
	c.mu.Lock()
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	return s
}

// Ready receives after a commit that may concern the stream: call Next.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Next appends to dst up to limit events after the cursor from the window.
// behind reports that the window no longer reaches back to after+1: read
// the store from the cursor, then call Next again. No events and not
// behind: wait for Ready.
func (s *Subscription) Next(after int64, dst []Event, limit int) (events []Event, behind bool) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tail = max(c.tail, after)
	if c.empty() || c.last <= after {
		return dst, false
	}
	if after+1 < c.first {
		return dst, true
	}
	for seq := after + 1; seq <= c.last && len(dst) < limit; seq++ {
		dst = append(dst, c.ring[c.slot(seq)])
	}
	return dst, false
}

// Close stops following; a conversation left without streams drops its
// window.
func (s *Subscription) Close() {
	f := s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	s.c.mu.Lock()
	delete(s.c.subs, s)
	if len(s.c.subs) == 0 && f.convs[s.id] == s.c {
		delete(f.convs, s.id)
		s.c.clear()
		s.c.ring = nil
	}
	s.c.mu.Unlock()
}

// Streams is the number of streams following the conversation.
func (f *Feed) Streams(conversationID string) int {
	c := f.conv(conversationID)
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs)
}

// Held is the number of events and bytes the conversation's window holds.
func (f *Feed) Held(conversationID string) (events, bytes int) {
	c := f.conv(conversationID)
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.empty() {
		return 0, 0
	}
	return int(c.last - c.first + 1), c.bytes
}

func (f *Feed) conv(id string) *feedConv {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.convs[id]
}

// Publish hands the frames of a commit, in sequence order per
// conversation, to the conversations' streams. Call it after the commit.
func (f *Feed) Publish(frames []protocol.RawFrame) {
	for len(frames) > 0 {
		n := 1
		for n < len(frames) && frames[n].ConversationID == frames[0].ConversationID {
			n++
		}
		f.publish(frames[0].ConversationID, frames[:n])
		frames = frames[n:]
	}
}

func (f *Feed) publish(id string, frames []protocol.RawFrame) {
	c := f.conv(id)
	if c == nil {
		return // no stream: nothing to keep
	}
	events := make([]Event, 0, len(frames))
	for _, fr := range frames {
		b, err := protocol.AppendSSE(nil, fr)
		if err != nil {
			// A stored frame was validated when it was appended, so this
			// does not happen; the streams would meet the same error
			// reading it from the store, where they report it.
			break
		}
		events = append(events, Event{Sequence: fr.Sequence, Type: fr.Type, SSE: b, CreatedAt: protocol.Time(fr.CreatedAt)})
	}
	if len(events) == 0 {
		return
	}
	c.mu.Lock()
	c.put(events)
	c.wakeAll()
	c.mu.Unlock()
}

// Refresh reads the conversation's frames that another process committed
// and publishes them: one read for all its streams, and while a read runs,
// the wake-ups that come meanwhile make one more.
func (f *Feed) Refresh(conversationID string) {
	c := f.conv(conversationID)
	if c == nil || f.read == nil {
		return
	}
	c.mu.Lock()
	if c.refreshing {
		c.again = true
		c.mu.Unlock()
		return
	}
	c.refreshing = true
	c.mu.Unlock()
	f.wg.Add(1)
	go f.refresh(conversationID, c)
}

// RefreshAll refreshes every conversation with streams: for a backend that
// may have missed other processes' commits.
func (f *Feed) RefreshAll() {
	f.mu.Lock()
	ids := make([]string, 0, len(f.convs))
	for id := range f.convs {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for _, id := range ids {
		f.Refresh(id)
	}
}

func (f *Feed) refresh(id string, c *feedConv) {
	defer f.wg.Done()
	for {
		c.mu.Lock()
		after := c.tail
		if !c.empty() {
			after = max(after, c.last)
		}
		c.mu.Unlock()
		frames, err := f.read(f.ctx, id, after, refreshPage)
		if err == nil {
			f.publish(id, frames)
		}
		c.mu.Lock()
		if err != nil {
			c.wakeAll() // the streams read the store themselves and report what fails
		}
		more := err == nil && len(frames) == refreshPage
		if !(c.again || more) || f.ctx.Err() != nil {
			c.refreshing = false
			c.mu.Unlock()
			return
		}
		c.again = false // the next read answers the wake-ups so far
		c.mu.Unlock()
	}
}

// Close stops the refreshes under way.
func (f *Feed) Close() {
	f.cancel()
	f.wg.Wait()
}
