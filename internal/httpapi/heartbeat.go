package httpapi

import (
	"math/rand/v2"
	"sync"
	"time"
)

// heartbeats is the one timer of every stream's heartbeat: a timing wheel
// of heartbeatSlots slots that turns once per interval. A stream takes a
// slot at random (the jitter: the streams' heartbeats spread over the
// interval instead of all firing at once) and waits on its slot's
// channel, which the wheel closes as it passes. No ticker per stream, and
// one goroutine for all of them.
type heartbeats struct {
	mu    sync.Mutex
	slots [heartbeatSlots]chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

const heartbeatSlots = 64

func newHeartbeats(interval time.Duration) *heartbeats {
	h := &heartbeats{stop: make(chan struct{}), done: make(chan struct{})}
	for i := range h.slots {
		h.slots[i] = make(chan struct{})
	}
	go h.turn(max(interval/heartbeatSlots, time.Millisecond))
	return h
}

// slot picks a stream's slot.
func (h *heartbeats) slot() int { return rand.IntN(heartbeatSlots) }

// wait returns a channel closed at the slot's next heartbeat.
func (h *heartbeats) wait(slot int) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.slots[slot]
}

func (h *heartbeats) turn(tick time.Duration) {
	defer close(h.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	for i := 0; ; i = (i + 1) % heartbeatSlots {
		select {
		case <-t.C:
		case <-h.stop:
			return
		}
		h.mu.Lock()
		ch := h.slots[i]
		h.slots[i] = make(chan struct{})
		h.mu.Unlock()
		close(ch)
	}
}

func (h *heartbeats) close() {
	close(h.stop)
	<-h.done
}
