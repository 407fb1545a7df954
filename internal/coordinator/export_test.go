package coordinator

import "context"

// ExpireDue expires every due proposal and waits until it is, for tests
// that move a fake clock (the sweeper runs on a real ticker).
func (c *Coordinator) ExpireDue(ctx context.Context) error { return c.expireDue(ctx, true) }

// QueueDepth is the number of new turns waiting for a worker.
func (c *Coordinator) QueueDepth() int { return c.pool.depth() }
