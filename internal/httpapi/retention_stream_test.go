package httpapi_test

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/testutil"
)

// TestStreamOfRemovedConversationEndsWithReplayGap: a stream following a
// conversation that retention removes (with its frames) ends with
// replay_gap rather than waiting for frames that can never come; opened
// again, the conversation is not found.
func TestStreamOfRemovedConversationEndsWithReplayGap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.conversation()
	acc := h.submit(c.ID, "hi")
	h.waitDone(c.ID, acc.RequestID)
	seenDone := make(chan struct{})
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- h.client.Stream(h.ctx(), c.ID, 0, func(f protocol.Frame) error {
			if f.Type == protocol.FrameDone {
				close(seenDone) // subscribed: the stream replayed the turn
			}
			return nil
		})
	}()
	select {
	case <-seenDone:
	case err := <-streamErr:
		t.Fatalf("stream ended early: %v", err)
	}
	res, err := h.store.PurgeIdleConversations(h.ctx(), store.PurgeIdleConversationsParams{UnusedBefore: h.clock.Now().Add(time.Hour)})
	if err != nil || res.Conversations != 1 {
		t.Fatalf("purge = %+v, %v", res, err)
	}
	select {
	case err := <-streamErr:
		wantCode(t, err, protocol.ReplayGap)
	case <-time.After(testutil.Patience): // a safety net only
		t.Fatal("the stream of the removed conversation did not end")
	}
	_, err = h.client.GetConversation(h.ctx(), c.ID, 0, 1)
	wantCode(t, err, protocol.NotFound)
}
