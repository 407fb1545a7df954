package coordinator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

// TestAppenderBounds: while an append is held, push says the queue is
// within bounds until it holds maxQueuedBytes of text (8 KiB frames reach
// it long before maxQueuedFrames), and wait hands back what a failed append
// carried apart from what queued behind it.
func TestAppenderBounds(t *testing.T) {
	t.Parallel()
	hold, started := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var calls [][]protocol.Payload
	fail := errors.New("refused")
	a := newAppender(func(ctx context.Context, ps []protocol.Payload) error {
		mu.Lock()
		calls = append(calls, ps)
		first := len(calls) == 1
		mu.Unlock()
		if first {
			close(started)
			<-hold
			return fail
		}
		return nil
	}, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) })
	big := protocol.TextPayload{Content: strings.Repeat("x", 8<<10), Role: protocol.RoleAssistant}
	if !a.push([]protocol.Payload{big}) {
		t.Fatal("the first frame is over the bounds")
	}
	<-started // the first is in flight, held; the rest queue behind it
	within := 0
	for a.push([]protocol.Payload{big}) {
		within++
		if within > maxQueuedFrames {
			t.Fatal("8 KiB frames never reached the byte bound")
		}
	}
	if want := maxQueuedBytes / payloadBytes(big); within != want {
		t.Fatalf("push stayed within bounds for %d queued frames, want %d", within, want)
	}
	pushed := within + 1
	close(hold)
	failed, queued, err := a.wait()
	if !errors.Is(err, fail) || len(failed) != 1 || len(queued) != pushed {
		t.Fatalf("wait: %v, %d failed, %d queued; want the failure, 1 and %d", err, len(failed), len(queued), pushed)
	}
	// Reset: the next push starts a fresh append.
	if !a.push([]protocol.Payload{big}) {
		t.Fatal("push after wait is over the bounds")
	}
	if failed, queued, err := a.wait(); err != nil || len(failed) != 0 || len(queued) != 0 {
		t.Fatalf("second wait: %v, %d, %d", err, len(failed), len(queued))
	}
}
