package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openAt opens and migrates a store at path, closed when tb ends.
func openAt(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := Open(path)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	if _, err := s.Migrate(context.Background(), storetest.Epoch); err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	return s
}

// mustOpen opens a fresh store in a temporary directory.
func mustOpen(tb testing.TB) *Store {
	tb.Helper()
	return openAt(tb, filepath.Join(tb.TempDir(), "studio.db"))
}

// TestConformance runs the store's conformance suite, each subtest on its
// own file, and then opens every file the suite wrote (conversations,
// turns, frames, forks, search documents, runs, workflows, proposals, audit
// rows...) with the distribution's sqlite3 (sqlite3cli_test.go): PRAGMA
// integrity_check and a count of every table. Without sqlite3 that part is
// skipped, unless STUDIO_REQUIRE_SQLITE3=1.
func TestConformance(t *testing.T) {
	t.Parallel()
	bin, err := lookSQLite3(t)
	if err != nil {
		t.Log(err)
	}
	storetest.Exercise(t, func(t *testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "studio.db")
		if bin != "" {
			// Registered before openAt's Close, so it runs after it.
			t.Cleanup(func() { sqlite3Counts(t, bin, path) })
		}
		return openAt(t, path)
	})
}

// TestPragmas checks the settings docs/design.md §3 requires on every connection
// of both pools: they are per connection, so one pool set up right proves
// nothing about the other. The writer's page cache is its own.
func TestPragmas(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	ctx := t.Context()
	want := map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1"}
	check := func(name string, conn *sql.Conn) {
		t.Helper()
		for pragma, w := range want {
			var got string
			if err := conn.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatalf("%s: PRAGMA %s: %v", name, pragma, err)
			}
			if strings.ToLower(got) != w {
				t.Errorf("%s: %s = %s, want %s", name, pragma, got, w)
			}
		}
		var timeout int
		if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil || timeout <= 0 {
			t.Errorf("%s: busy_timeout = %d, %v; want a positive timeout", name, timeout, err)
		}
	}
	w, err := s.w.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("writer", w)
	// The writer's cache holds the pages of many conversations' appends.
	var cache int
	if err := w.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&cache); err != nil || cache != -writerCacheKiB {
		t.Errorf("writer: cache_size = %d, %v; want %d (KiB)", cache, err, -writerCacheKiB)
	}
	w.Close()
	// Hold several reader connections at once so the pool opens distinct ones.
	var conns []*sql.Conn
	for i := range 4 {
		c, err := s.r.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("reader %d", i), c)
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	s := mustOpen(t) // migrated once
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		v, err := s.Migrate(t.Context(), storetest.Epoch.Add(time.Hour))
		if err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
		if v != len(ms) {
			t.Fatalf("version = %d, want %d", v, len(ms))
		}
	}
	var rows int
	if err := s.w.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) {
		t.Fatalf("schema_migrations has %d rows, want %d", rows, len(ms))
	}
	if v, err := s.SchemaVersion(t.Context()); err != nil || v != len(ms) {
		t.Fatalf("SchemaVersion = %d, %v", v, err)
	}
}

func TestMigrateRefusesNewerDatabase(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	if _, err := sqlstore.Migrate(t.Context(), s.w, dialect{}, nil, time.Time{}); err == nil {
		t.Fatal("a binary with fewer migrations than the database migrated it")
	}
}

// TestMigrateOneTransactionEach: a failing migration leaves no trace and
// does not advance the version.
func TestMigrateOneTransactionEach(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	bad := append(ms, store.Migration{Version: len(ms) + 1, Name: "broken",
		SQL: `CREATE TABLE half_done (x INTEGER); INSERT INTO no_such_table VALUES (1);`})
	v, err := sqlstore.Migrate(t.Context(), s.w, dialect{}, bad, time.Time{})
	if err == nil {
		t.Fatal("a failing migration succeeded")
	}
	if v != len(ms) {
		t.Fatalf("version after failure = %d, want %d", v, len(ms))
	}
	var n int
	if err := s.w.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM sqlite_master WHERE name = 'half_done'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("the failed migration's first statement was kept")
	}
}

func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		ok    bool
	}{
		{"in order", fstest.MapFS{
			"m/0002_b.sql": file("B"), "m/0001_a.sql": file("A"), "m/README.md": file("ignored"),
		}, true},
		{"gap", fstest.MapFS{"m/0001_a.sql": file("A"), "m/0003_c.sql": file("C")}, false},
		{"not from one", fstest.MapFS{"m/0002_b.sql": file("B")}, false},
		{"duplicate", fstest.MapFS{"m/0001_a.sql": file("A"), "m/0001_b.sql": file("B")}, false},
		{"bad name", fstest.MapFS{"m/0001_a.sql": file("A"), "m/two.sql": file("B")}, false},
		{"zero", fstest.MapFS{"m/0000_a.sql": file("A")}, false},
	} {
		ms, err := store.LoadMigrations(tc.files, "m")
		if tc.ok != (err == nil) {
			t.Fatalf("%s: LoadMigrations = %v, %v", tc.name, ms, err)
		}
		if tc.ok && (len(ms) != 2 || ms[0].Version != 1 || ms[0].Name != "a" || ms[0].SQL != "A" || ms[1].Version != 2) {
			t.Fatalf("%s: migrations = %+v", tc.name, ms)
		}
	}
	// The embedded set itself loads.
	if ms, err := Migrations(); err != nil || len(ms) == 0 {
		t.Fatalf("embedded migrations: %v, %v", ms, err)
	}
}

// TestAdminEventsAppendOnly: the database itself refuses UPDATE and DELETE
// on the audit table, whatever the code above it does.
func TestAdminEventsAppendOnly(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	ctx := t.Context()
	e, err := s.AppendAdminEvent(ctx, store.AppendAdminEventParams{Actor: "studio_operator", Action: "studio.operator.command",
		Details: []byte(`{"decision":"confirmed"}`), Now: storetest.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE admin_events SET action = 'forged' WHERE id = ?`,
		`UPDATE admin_events SET details = '{}'`,
		`DELETE FROM admin_events WHERE id = ?`,
		`DELETE FROM admin_events`,
	} {
		args := []any{}
		if strings.Contains(q, "?") {
			args = append(args, e.ID)
		}
		_, err := s.w.ExecContext(ctx, q, args...)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("%s: err = %v, want the append-only refusal", q, err)
		}
	}
	got, err := s.ListAdminEvents(ctx, store.ListAdminEventsParams{})
	if err != nil || len(got) != 1 || got[0].Action != "studio.operator.command" {
		t.Fatalf("after refused changes: %+v, %v", got, err)
	}
}

// TestOpenUnusualPath: the data directory is the user's; characters that mean
// something in a URI must not redirect or break the database file.
func TestOpenUnusualPath(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"with space", "hash#dir", "question?mark", "percent%41dir", "amp&_pragma=x"} {
		path := filepath.Join(t.TempDir(), dir, "studio.db")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		s := openAt(t, path)
		if _, err := s.CreateConversation(t.Context(), store.CreateConversationParams{ID: "c", Now: storetest.Epoch}); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s: the database is not at %s: %v", dir, path, err)
		}
	}
}

// TestRestart: a file reopened by a new process keeps its rows, and recovery
// fails the turn the old process left running.
func TestRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "studio.db")
	ctx := t.Context()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx, storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: "c", Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	tr, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: "c", RequestID: "r", Instruction: "hi",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartTurn(ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openAt(t, path)
	recovered, err := s2.RecoverTurns(ctx, store.RecoverTurnsParams{Now: storetest.Epoch.Add(time.Minute)})
	if err != nil || len(recovered) != 1 || recovered[0].Status != store.TurnFailed {
		t.Fatalf("recovery after reopen = %+v, %v", recovered, err)
	}
	frames, err := s2.ListFrames(ctx, store.ListFramesParams{ConversationID: "c"})
	if err != nil || len(frames) != 3 || frames[2].Type != protocol.FrameDone {
		t.Fatalf("frames after recovery = %+v, %v", frames, err)
	}
}

// --- benchmarks ---------------------------------------------------------------

// benchTurn opens a store with one conversation and a running turn.
func benchTurn(b *testing.B) (*Store, string, string) {
	b.Helper()
	s := mustOpen(b)
	ctx := context.Background()
	if _, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: "c", Now: storetest.Epoch}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: "c", RequestID: "r", Instruction: "bench",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch}); err != nil {
		b.Fatal(err)
	}
	return s, "c", "r"
}

func benchFrames(n int) []store.NewFrame {
	fs := make([]store.NewFrame, n)
	for i := range fs {
		fs[i] = store.NewFrame{Payload: protocol.TextPayload{
			Content: "Three runs failed today: audit-repo-x, nightly-index and docs-build.", Format: "markdown", Role: protocol.RoleAssistant}}
	}
	return fs
}

// BenchmarkAppendFrames measures durable appends (synchronous=FULL) by
// one conversation: one frame per transaction, and 10 and 100 (what a
// pipelined turn queues while its previous append commits); the CPU per
// frame is what the machine's other load does not blur.
func BenchmarkAppendFrames(b *testing.B) {
	for _, batch := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, conv, req := benchTurn(b)
			ctx := context.Background()
			frames := benchFrames(batch)
			var n int
			cpu0 := testutil.ProcessCPU()
			for b.Loop() {
				if _, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv, RequestID: req, Frames: frames, Now: storetest.Epoch}); err != nil {
					b.Fatal(err)
				}
				n += batch
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "frames/s")
			b.ReportMetric(float64((testutil.ProcessCPU()-cpu0).Microseconds())/float64(n), "cpu-µs/frame")
		})
	}
}

// BenchmarkListFrames measures replay throughput: a whole 10k-frame
// conversation read in pages of 500, as a stream replays it.
func BenchmarkListFrames(b *testing.B) {
	const total, page = 10_000, 500
	s, conv, req := benchTurn(b)
	ctx := context.Background()
	for range (total - 1) / page {
		if _, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv, RequestID: req, Frames: benchFrames(page), Now: storetest.Epoch}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv, RequestID: req, Frames: benchFrames((total - 1) % page), Now: storetest.Epoch}); err != nil {
		b.Fatal(err)
	}
	var n int
	for b.Loop() {
		var after int64
		for {
			fs, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: conv, AfterSequence: after, Limit: page})
			if err != nil {
				b.Fatal(err)
			}
			if len(fs) == 0 {
				break
			}
			n += len(fs)
			after = fs[len(fs)-1].Sequence
		}
		if after != total {
			b.Fatalf("replayed to %d, want %d", after, total)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "frames/s")
}

// Concurrent readers during writes must never see a gap: the reader pool
// reads committed WAL snapshots only.
func TestReadersSeeNoGap(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	ctx := t.Context()
	if _, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: "c", Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: "c", RequestID: "r", Instruction: "x",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for range 100 {
			if _, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: "c", RequestID: "r", Frames: benchFrames(3), Now: storetest.Epoch}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for i := range 3 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				fs, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: "c", Limit: 10_000})
				if err != nil {
					t.Error(err)
					return
				}
				// Batches of three after the user frame: a snapshot ends on a
				// batch boundary and has no hole.
				for j, f := range fs {
					if f.Sequence != int64(j+1) {
						t.Errorf("reader %d: frame %d has sequence %d", i, j, f.Sequence)
						return
					}
				}
				if (len(fs)-1)%3 != 0 {
					t.Errorf("reader %d: saw %d frames, half a transaction", i, len(fs))
					return
				}
			}
		})
	}
	wg.Wait()
}
