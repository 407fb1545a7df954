package postgres

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// Faults PostgreSQL brings to several daemons: a daemon paused inside a
// transaction, a lock it holds, a session the server ends.

// TestSessionTimeouts: every connection of the pool carries the session
// timeouts, the URL's own setting winning.
func TestSessionTimeouts(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	s, err := OpenWith(t.Context(), url+"&lock_timeout=1500", Options{StatementTimeout: 7 * time.Second, IdleInTransactionTimeout: 900 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for setting, want := range map[string]string{"lock_timeout": "1500ms", "statement_timeout": "7s", "idle_in_transaction_session_timeout": "900ms"} {
		var got string
		if err := s.db.QueryRowContext(t.Context(), `SHOW `+setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", setting, got, want)
		}
	}
}

// TestReapDoesNotWaitForALockedInstance: a daemon whose sessions hang
// holds its instance's row — frozen inside its renewal (the row locked for
// update), or inside a fenced write that locked it once (for share). A
// reaper reaps it all the same, without waiting; the instance's own
// reaped_at follows once the row is free. Meanwhile a renewal of the
// reaped instance is refused, and nothing else waits on the frozen row.
func TestReapDoesNotWaitForALockedInstance(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	s := openAt(t, url)
	ctx := t.Context()
	now := storetest.Epoch
	for _, id := range []string{"renewing", "sharing", "dead"} {
		if _, err := s.RegisterInstance(ctx, store.RegisterInstanceParams{Instance: store.Instance{ID: id, StartedAt: now, HeartbeatAt: now,
			LeaseExpiresAt: now.Add(time.Second)}}); err != nil {
			t.Fatal(err)
		}
	}
	// The frozen sessions: their transactions hold the rows, never ending.
	hold := func(query string) pgx.Tx {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, query); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	renewing := hold(`UPDATE studio_instances SET heartbeat_at = heartbeat_at WHERE id = 'renewing'`)
	sharing := hold(`SELECT 1 FROM studio_instances WHERE id = 'sharing' FOR SHARE`)
	reapCtx, cancel := context.WithTimeout(ctx, 30*time.Second) // a safety net: it must not wait for the locks
	defer cancel()
	got, err := s.ReapInstances(reapCtx, store.ReapInstancesParams{Now: now.Add(time.Minute), Except: "live"})
	if err != nil {
		t.Fatalf("ReapInstances while rows are locked: %v", err)
	}
	var ids []string
	for _, in := range got {
		ids = append(ids, in.ID)
	}
	if !slices.Equal(ids, []string{"dead", "renewing", "sharing"}) {
		t.Fatalf("reaped %v, want every expired instance, locked or not", ids)
	}
	for _, id := range ids {
		in, err := s.ListInstances(ctx, store.ListInstancesParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range in {
			if i.ID == id && i.State(now.Add(time.Minute)) != store.InstanceReaped {
				t.Fatalf("instance %s is %s", id, i.State(now.Add(time.Minute)))
			}
		}
	}
	// Its renewal (on a session of its own) is refused: the reaping stands.
	later := now.Add(time.Minute)
	if _, err := s.RenewLease(ctx, store.RenewLeaseParams{ID: "sharing", Now: later, ExpiresAt: later.Add(time.Minute)}); !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("renewal of a reaped instance: %v, want conflict", err)
	}
	var rowReaped int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM studio_instances WHERE reaped_at IS NOT NULL`).Scan(&rowReaped); err != nil {
		t.Fatal(err)
	}
	if rowReaped != 1 {
		t.Fatalf("%d instance rows say reaped, want the unlocked one alone until the locks go", rowReaped)
	}
	for _, tx := range []pgx.Tx{renewing, sharing} {
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, err = s.ReapInstances(ctx, store.ReapInstancesParams{Now: now.Add(time.Minute), Except: "live"}); err != nil || len(got) != 0 {
		t.Fatalf("after the locks went: reaped %+v, %v; want none again", got, err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM studio_instances WHERE reaped_at IS NOT NULL`).Scan(&rowReaped); err != nil {
		t.Fatal(err)
	}
	if rowReaped != 3 {
		t.Fatalf("%d instance rows say reaped after the locks went, want 3", rowReaped)
	}
}

// TestIdleTransactionEnded: a session paused inside a transaction loses it
// after the idle timeout, and its locks with it; a writer that met the
// lock meanwhile failed with a transient error (lock_timeout) that a
// retry gets past.
func TestIdleTransactionEnded(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	paused, err := OpenWith(t.Context(), url, Options{IdleInTransactionTimeout: 2 * time.Second, LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer paused.Close()
	s := openAt(t, url)
	ctx := t.Context()
	now := storetest.Epoch
	if _, err := s.RegisterInstance(ctx, store.RegisterInstanceParams{Instance: store.Instance{ID: "i", StartedAt: now, HeartbeatAt: now,
		LeaseExpiresAt: now.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	tx, err := paused.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // the server ended it
	if _, err := tx.ExecContext(ctx, `UPDATE studio_instances SET heartbeat_at = heartbeat_at WHERE id = 'i'`); err != nil {
		t.Fatal(err)
	}
	// The paused session's own pool has lock_timeout 100 ms.
	_, err = paused.RenewLease(ctx, store.RenewLeaseParams{ID: "i", Now: now, ExpiresAt: now.Add(time.Hour)})
	if !store.Transient(err) {
		t.Fatalf("renewal that met the lock: err = %v, want a transient error (lock_timeout)", err)
	}
	// The server ends the idle transaction after 2 s.
	testutil.Eventually(t, func() bool {
		_, err = paused.RenewLease(ctx, store.RenewLeaseParams{ID: "i", Now: now, ExpiresAt: now.Add(time.Hour)})
		if err != nil && !store.Transient(err) {
			t.Fatalf("renewal after the idle transaction: %v", err)
		}
		return err == nil
	}, "a renewal after the idle transaction")
	if _, err := tx.ExecContext(ctx, `SELECT 1`); err == nil || err == sql.ErrTxDone {
		t.Fatalf("the idle transaction still works: %v", err)
	}
}

// TestTerminatedSessionIsTransient: a write on a session the server ended
// (a restart, a failover: pg_terminate_backend) fails with a transient
// error, and the pool's next write works.
func TestTerminatedSessionIsTransient(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	s := openAt(t, url)
	ctx := t.Context()
	s.db.SetMaxOpenConns(1)
	var pid int
	if err := s.db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	admin := openAt(t, url)
	if _, err := admin.db.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	now := storetest.Epoch
	_, err := s.RegisterInstance(ctx, store.RegisterInstanceParams{Instance: store.Instance{ID: "x", StartedAt: now, HeartbeatAt: now, LeaseExpiresAt: now}})
	if err == nil {
		t.Log("database/sql saw the bad connection first and retried on a new one")
		return
	}
	if !store.Transient(err) {
		t.Fatalf("write on a terminated session: err = %v (%T), want transient", err, err)
	}
	if _, err := s.RegisterInstance(ctx, store.RegisterInstanceParams{Instance: store.Instance{ID: "y", StartedAt: now, HeartbeatAt: now, LeaseExpiresAt: now}}); err != nil {
		t.Fatalf("the next write: %v", err)
	}
}
