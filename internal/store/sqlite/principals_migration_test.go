package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/store/storetest"
)

// TestMigrateToPrincipalsKeepsRows: a database from before principals
// (version 6) migrates without losing a row; its turns have no submitter
// and its audit rows keep their actor; its conversations belong to the
// bootstrap owner and are the team's.
func TestMigrateToPrincipalsKeepsRows(t *testing.T) {
	t.Parallel()
	s := migratedTo(t, 6)
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	ctx, now := t.Context(), protocol.Timestamp(storetest.Epoch)
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO studio_operator_conversations (id, status, next_sequence, created_at, updated_at) VALUES ('c1', 'active', 1, ?, ?)`, []any{now, now}},
		{`INSERT INTO studio_operator_turns (request_id, conversation_id, instruction, context_json, context_hash, status, created_at)
		 VALUES ('r1', 'c1', 'hello', '{}', 'h', 'completed', ?)`, []any{now}},
		{`INSERT INTO admin_events (created_at, actor, action, target_id, details) VALUES (?, 'studio_operator', 'studio.operator.command', 'p1', '{}')`, []any{now}},
	} {
		if _, err := s.w.ExecContext(ctx, st.q, st.args...); err != nil {
			t.Fatalf("%s: %v", st.q, err)
		}
	}
	if v, err := s.Migrate(ctx, storetest.Epoch.Add(time.Hour)); err != nil || v != len(ms) {
		t.Fatalf("migrate: %d, %v", v, err)
	}
	tr, err := s.GetTurn(ctx, "r1")
	if err != nil || tr.Instruction != "hello" || tr.SubmittedBy != "" {
		t.Fatalf("the old turn: %+v, %v", tr, err)
	}
	if c, err := s.GetConversation(ctx, "c1"); err != nil || c.Owner != protocol.OwnerPrincipal || c.Visibility != protocol.VisibilityTeam {
		t.Fatalf("the old conversation: %+v, %v; want owner's, team", c, err)
	}
	es, err := s.ListAdminEvents(ctx, store.ListAdminEventsParams{})
	if err != nil || len(es) != 1 || es[0].Actor != "studio_operator" {
		t.Fatalf("the old audit rows: %+v, %v", es, err)
	}
	if ps, err := s.ListPrincipals(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("principals after the migration: %+v, %v", ps, err)
	}
}

// TestIdentityUpgrade: principals get their origin from the audit of
// their creation (storetest.ExerciseIdentityUpgrade).
func TestIdentityUpgrade(t *testing.T) {
	t.Parallel()
	s := migratedTo(t, storetest.IdentityUpgradeFrom)
	storetest.ExerciseIdentityUpgrade(t, s,
		func(ctx context.Context, q string) error { _, err := s.w.ExecContext(ctx, q); return err },
		func(ctx context.Context) error { _, err := s.Migrate(ctx, storetest.Epoch); return err })
}

// migratedTo is a new database migrated up to version.
func migratedTo(t *testing.T, version int) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := sqlstore.Migrate(t.Context(), s.w, dialect{}, ms[:version], storetest.Epoch); err != nil || v != version {
		t.Fatalf("migrate to %d: %d, %v", version, v, err)
	}
	return s
}
