package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Self-fencing. A daemon that shares its database holds a lease
// (internal/lease) that other daemons' reapers honour until it runs out;
// after that they take its work over. So a daemon that cannot prove its
// lease current — its renewals fail: the database, or the way to it,
// hangs — must act as if it were already reaped: it confirms, denies and
// expires no proposal, claims no turn, takes nothing over, and starts no
// command, until it renews. Decisions are answered service_failure with a
// retry hint (another daemon can take them), and a command's execution
// checks the lease inside its own transaction (store.Fence.Lease), so it
// never starts on a lease that ran out. What the daemon already runs goes
// on: a turn's frames are fenced by its instance (a reaping refuses them),
// and what it executes is ordered against a takeover by its proposal's row.

// LeaseHolder says whether this daemon holds its lease at now
// (lease.Keeper).
type LeaseHolder interface {
	Held(now time.Time) error
}

// leaseRef is the daemon's lease, set once it started (UseLease).
type leaseRef struct {
	mu sync.Mutex
	h  LeaseHolder
}

// UseLease makes the coordinator fence itself by h: set it when the lease
// started, before Recover (the lease is started after the coordinator is
// built: it needs the coordinator as a reaper).
func (c *Coordinator) UseLease(h LeaseHolder) {
	c.lease.mu.Lock()
	c.lease.h = h
	c.lease.mu.Unlock()
}

// leaseRetryAfter is the retry hint of a decision refused for an unproven
// lease: about a renewal later.
const leaseRetryAfter = time.Second

// leaseErr is nil while this daemon can prove its lease current (always,
// when it holds the database alone); else the refusal to answer with.
func (c *Coordinator) leaseErr() *protocol.Error {
	if !c.cfg.Shared {
		return nil
	}
	c.lease.mu.Lock()
	h := c.lease.h
	c.lease.mu.Unlock()
	if h == nil {
		return nil
	}
	err := h.Held(time.Now())
	if err == nil {
		return nil
	}
	pe := store.LeaseUnproven(c.cfg.Instance, err)
	pe.RetryAfterMs = leaseRetryAfter.Milliseconds()
	return pe
}

// leaseCheck is leaseErr as a fence's Lease check (store.Fence.Lease).
func (c *Coordinator) leaseCheck() error {
	if pe := c.leaseErr(); pe != nil {
		return pe
	}
	return nil
}

// holding is ctx fenced for a write that starts or takes over work (a
// confirmation, a claim, a takeover): this daemon's instance must be live
// and its lease provably current when the write's transaction runs.
func (c *Coordinator) holding(ctx context.Context) context.Context {
	if !c.cfg.Shared {
		return ctx
	}
	return store.WithFence(ctx, store.Fence{Instance: c.cfg.Instance, Hold: true, Lease: c.leaseCheck})
}
