package coordinator

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExpireDue expires every due proposal and waits until it is, for tests
// that move a fake clock (the sweeper runs on a real ticker).
func (c *Coordinator) ExpireDue(ctx context.Context) error { return c.expireDue(ctx, true) }

// TurnPage is how many of a turn's frames are read at a time.
const TurnPage = turnPage

// QueueDepth is the number of new turns waiting for a worker.
func (c *Coordinator) QueueDepth() int { return c.pool.depth() }

// WaitOwnersGone waits until no turn has an owner in this process (or the
// timeout passes) and returns how many are left.
func (c *Coordinator) WaitOwnersGone(timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		n := len(c.owners)
		c.mu.Unlock()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

// ConfirmAsRead is a confirm whose caller read the proposal as stale (before
// another decision settled it): the step after the read, for a test of that race.
func (c *Coordinator) ConfirmAsRead(ctx context.Context, stale store.Proposal) (protocol.ProposalResult, error) {
	return c.deliverDecision(ctx, stale, decideConfirm)
}
