package coordinator

import (
	"context"

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

// Owners is the number of turns with an owner in this process.
func (c *Coordinator) Owners() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.owners)
}

// ConfirmAsRead is a confirm whose caller read the proposal as stale (before
// another decision settled it): the step after the read, for a test of that race.
func (c *Coordinator) ConfirmAsRead(ctx context.Context, stale store.Proposal) (protocol.ProposalResult, error) {
	return c.deliverDecision(ctx, stale, decideConfirm)
}
