package httpapi

import (
	"context"
	"fmt"
	"time"

	"github.com/studio/operator/internal/store"
)

// LeaseHolder says whether this daemon holds its lease (lease.Keeper).
type LeaseHolder interface {
	Held(now time.Time) error
}

// WriterStallLimit is how long a write may wait for SQLite's group-commit
// writer before the daemon says it is not ready: the disk is stalled or
// full, and every write (turns, frames, runs) waits behind that one.
const WriterStallLimit = 10 * time.Second

// WithWriterStall makes ready answer "StateDB writer stalled" while the
// oldest write handed to the group-commit writer has waited longer than
// limit (oldest is the store's WriterOldestWait), whatever ready says
// otherwise.
func WithWriterStall(ready func(context.Context) (string, error), oldest func() time.Duration, limit time.Duration) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if w := oldest(); w > limit {
			return "StateDB writer stalled", fmt.Errorf("a write has waited %s for the SQLite writer (limit %s): the disk is stalled or full", w.Round(time.Second), limit)
		}
		return ready(ctx)
	}
}

// StoreReadiness is the daemon's readiness check for Config.Ready: the
// database answers, its schema is at the binary's version (migrations),
// and, when lease is not nil (several daemons on one PostgreSQL database),
// this daemon holds its lease.
func StoreReadiness(st store.Store, migrations int, lease LeaseHolder) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		v, err := st.SchemaVersion(ctx)
		if err != nil {
			return "database unreachable", err
		}
		if v < migrations {
			return fmt.Sprintf("migrations pending: schema version %d of %d", v, migrations), nil
		}
		if lease != nil {
			if err := lease.Held(time.Now()); err != nil {
				return "lease not held", err
			}
		}
		return "", nil
	}
}
