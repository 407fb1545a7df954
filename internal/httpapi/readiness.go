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
