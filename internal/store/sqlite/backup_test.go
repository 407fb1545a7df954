package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// TestBackupWhileWriting: a backup taken while frames are being appended
// is a sound database holding every frame committed before it started,
// and a contiguous run of frames (one commit's state, nothing torn).
func TestBackupWhileWriting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openAt(t, filepath.Join(dir, "studio.db"))
	ctx := context.Background()
	if _, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: "c", Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: "c", RequestID: "r", Instruction: "backup",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var committed int64 // the last sequence an append returned
	appended := make(chan struct{}, 1)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			fs, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: "c", RequestID: "r", Frames: benchFrames(5), Now: storetest.Epoch})
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			committed = fs[len(fs)-1].Sequence
			mu.Unlock()
			select {
			case appended <- struct{}{}:
			default:
			}
		}
	}()
	var copies []string
	var floors []int64
	for i := range 3 {
		<-appended // appends are in flight
		mu.Lock()
		floor := committed
		mu.Unlock()
		dest := filepath.Join(dir, "backup-"+string(rune('a'+i))+".db")
		if err := s.Backup(ctx, dest); err != nil {
			t.Fatal(err)
		}
		copies, floors = append(copies, dest), append(floors, floor)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, dest := range copies {
		fc, err := Inspect(ctx, dest)
		if err != nil || len(fc.Problems) > 0 {
			t.Fatalf("backup %s: %+v, %v", dest, fc, err)
		}
		b, err := Open(dest)
		if err != nil {
			t.Fatal(err)
		}
		var n, maxSeq int64
		err = b.r.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MAX(sequence), 0) FROM studio_operator_frames WHERE conversation_id = 'c'`).Scan(&n, &maxSeq)
		b.Close()
		if err != nil {
			t.Fatal(err)
		}
		if maxSeq < floors[i] || n != maxSeq {
			t.Fatalf("backup %d holds %d frames up to %d; %d were committed before it started", i, n, maxSeq, floors[i])
		}
	}
	if err := s.Backup(ctx, copies[0]); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("backup over an existing file: %v", err)
	}
}

// TestRestore: a sound copy replaces the database (the old one kept
// beside it, WAL and all); a corrupt file, a file that is no database, and
// a schema newer than the binary's are refused, changing nothing.
func TestRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	live := filepath.Join(dir, "data", "studio.db")
	if err := os.Mkdir(filepath.Dir(live), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(live)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx, storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: "before-backup", Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.db")
	if err := s.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: "after-backup", Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Refusals first: nothing changes.
	corrupt := filepath.Join(dir, "corrupt.db")
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4096; i < len(b) && i < 4096*4; i++ { // pages 2-4: the tables' b-trees
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(corrupt, b, 0o600); err != nil {
		t.Fatal(err)
	}
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database\n", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.db")
	if err := copyWithVersion(ctx, backup, newer, len(ms)+1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{corrupt, ""},
		{notDB, "not a readable SQLite database"},
		{newer, "newer than this binary's"},
		{filepath.Join(dir, "missing.db"), ""},
	} {
		_, _, err := Restore(ctx, tc.file, live, len(ms), storetest.Epoch)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("restore %s: %v, want an error saying %q", filepath.Base(tc.file), err, tc.want)
		}
		if tc.file != filepath.Join(dir, "missing.db") {
			var re *RestoreError
			if !errors.As(err, &re) {
				t.Fatalf("restore %s: %T %v, want a *RestoreError", filepath.Base(tc.file), err, err)
			}
		}
		if ids := conversationIDs(t, live); len(ids) != 2 {
			t.Fatalf("after refusing %s the database holds %v", filepath.Base(tc.file), ids)
		}
	}

	previous, fc, err := Restore(ctx, backup, live, len(ms), storetest.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	if fc.SchemaVersion != len(ms) || previous == "" {
		t.Fatalf("restore = %q, %+v", previous, fc)
	}
	if ids := conversationIDs(t, live); len(ids) != 1 || ids[0] != "before-backup" {
		t.Fatalf("restored database holds %v, want the backup's conversation only", ids)
	}
	if ids := conversationIDs(t, previous); len(ids) != 2 {
		t.Fatalf("the replaced database %s holds %v, want both conversations", previous, ids)
	}
	if fi, err := os.Stat(live); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("restored file: %v, %v", fi, err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(live), ".studio.db.restore-*"))
	if len(left) != 0 {
		t.Fatalf("restore left %v", left)
	}
}

// copyWithVersion copies the database src to dest and records one more
// migration in it, as a newer binary would have.
func copyWithVersion(ctx context.Context, src, dest string, version int) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dest, b, 0o600); err != nil {
		return err
	}
	s, err := Open(dest)
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.w.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from_the_future', 0)`, version)
	return err
}

// conversationIDs lists the conversations of the database file at path.
func conversationIDs(t *testing.T, path string) []string {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.r.QueryContext(context.Background(), `SELECT id FROM studio_operator_conversations ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestWALAutocheckpointOption: the option reaches every connection of both
// pools (a pragma is per connection), the writer's as the checkpointer's
// backstop; without it SQLite's default holds. 0 leaves no checkpointer.
func TestWALAutocheckpointOption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		opts           []Option
		reader, writer int
		checkpointer   bool
	}{
		{nil, 1000, backstopPages * 1000, true},
		{[]Option{WALAutocheckpoint(0)}, 0, 0, false},
		{[]Option{WALAutocheckpoint(250)}, 250, backstopPages * 250, true},
	} {
		s, err := Open(filepath.Join(t.TempDir(), "studio.db"), tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]struct {
			db interface {
				QueryRowContext(context.Context, string, ...any) *sql.Row
			}
			want int
		}{"writer": {s.w, tc.writer}, "reader": {s.r, tc.reader}} {
			var got int
			if err := c.db.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&got); err != nil || got != c.want {
				t.Errorf("%s: wal_autocheckpoint = %d, %v; want %d", name, got, err, c.want)
			}
		}
		if got := s.cp != nil; got != tc.checkpointer {
			t.Errorf("%v: checkpointer %v, want %v", tc.opts, got, tc.checkpointer)
		}
		s.Close()
	}
}

// TestRestoreRefusesForeignDatabases: SQLite files that keep a
// schema_migrations table of their own — golang-migrate's layout, or
// studio's layout with another application's migrations — are refused,
// and the database stays as it was.
func TestRestoreRefusesForeignDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, live, maxVersion := liveDatabase(t, "live")
	foreign := func(name string, stmts ...string) string {
		path := filepath.Join(dir, name)
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		return path
	}
	golangMigrate := foreign("golang-migrate.db",
		`CREATE TABLE schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (3, false)`,
		`CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)`)
	otherApp := foreign("other-app.db",
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, 'create_users', 0), (2, 'add_email', 0)`,
		`CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)`)
	emptyLedger := foreign("empty-ledger.db",
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)`)
	for _, tc := range []struct{ file, want string }{
		{golangMigrate, "another tool's layout (dirty BOOLEAN, version BIGINT)"},
		{otherApp, `records migration 1 as "create_users"`},
		{emptyLedger, "records none of studio's migrations"},
	} {
		_, _, err := Restore(ctx, tc.file, live, maxVersion, storetest.Epoch)
		var re *RestoreError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "not a studio one") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("restore %s: %v, want a refusal saying %q", filepath.Base(tc.file), err, tc.want)
		}
		if ids := conversationIDs(t, live); len(ids) != 1 || ids[0] != "live" {
			t.Fatalf("after refusing %s the database holds %v", filepath.Base(tc.file), ids)
		}
	}
}

// TestRestoreTwiceInOneSecond: two restores within one second keep both
// replaced databases, each under a name of its own.
func TestRestoreTwiceInOneSecond(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, live, maxVersion := liveDatabase(t, "first")
	backups := []string{
		migratedWithConversation(t, filepath.Join(dir, "b1", "studio.db"), "second"),
		migratedWithConversation(t, filepath.Join(dir, "b2", "studio.db"), "third"),
	}
	var kept []string
	for _, b := range backups {
		previous, _, err := Restore(ctx, b, live, maxVersion, storetest.Epoch)
		if err != nil {
			t.Fatalf("restore %s within the same second: %v", b, err)
		}
		kept = append(kept, previous)
	}
	if kept[0] == kept[1] {
		t.Fatalf("both restores kept the replaced database as %s", kept[0])
	}
	for i, want := range []string{"first", "second"} {
		if ids := conversationIDs(t, kept[i]); len(ids) != 1 || ids[0] != want {
			t.Errorf("%s holds %v, want %s", kept[i], ids, want)
		}
	}
	if ids := conversationIDs(t, live); len(ids) != 1 || ids[0] != "third" {
		t.Errorf("the restored database holds %v", ids)
	}
}

// liveDatabase is a test's directory with the data directory's database
// in it (data/studio.db, holding the conversation id), and this binary's
// schema version.
func liveDatabase(t *testing.T, id string) (dir, live string, maxVersion int) {
	t.Helper()
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	return dir, migratedWithConversation(t, filepath.Join(dir, "data", "studio.db"), id), len(ms)
}

// migratedWithConversation makes a migrated database at path (its
// directory created) holding one conversation, closed.
func migratedWithConversation(t *testing.T, path, id string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(t.Context(), storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateConversation(t.Context(), store.CreateConversationParams{ID: id, Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
