package sqlite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/store/storetest"
)

// The distribution's sqlite3 (3.37 and later: Debian 12, Ubuntu 22.04) must
// open what the daemon writes: operators inspect, back up and repair the
// file with it. The bundled SQLite is newer, so a schema it accepts can
// still be "malformed" to the system library.

// distributionSQLite3 is the sqlite3 command on PATH. Without it the test
// skips, unless STUDIO_REQUIRE_SQLITE3=1 (CI) makes that a failure.
func distributionSQLite3(tb testing.TB) string {
	tb.Helper()
	bin, err := lookSQLite3(tb)
	if err != nil {
		tb.Skip(err.Error())
	}
	return bin
}

// lookSQLite3 finds sqlite3 on PATH. Not finding it fails tb when
// STUDIO_REQUIRE_SQLITE3=1 (CI), and is returned as an error otherwise.
func lookSQLite3(tb testing.TB) (string, error) {
	tb.Helper()
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		if os.Getenv("STUDIO_REQUIRE_SQLITE3") == "1" {
			tb.Fatalf("sqlite3 not found on PATH and STUDIO_REQUIRE_SQLITE3=1: %v", err)
		}
		return "", fmt.Errorf("sqlite3 not found on PATH (set STUDIO_REQUIRE_SQLITE3=1 to make this a failure)")
	}
	return bin, nil
}

// sqlite3Counts opens the database file at path (closed by the daemon's
// store) with bin, runs PRAGMA integrity_check and counts the rows of every
// table sqlite_master lists. It fails tb on any error the tool reports.
func sqlite3Counts(tb testing.TB, bin, path string) map[string]int {
	tb.Helper()
	run := func(sql string) string {
		tb.Helper()
		out, err := exec.Command(bin, "-bail", "-batch", path, sql).CombinedOutput()
		if err != nil || strings.Contains(string(out), "Error") {
			tb.Fatalf("sqlite3 %s %q: %v\n%s", filepath.Base(path), sql, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run(`PRAGMA integrity_check;`); got != "ok" {
		tb.Fatalf("sqlite3: integrity_check of %s = %q", path, got)
	}
	var q strings.Builder
	tables := strings.Fields(run(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name;`))
	if len(tables) == 0 {
		tb.Fatalf("sqlite3 lists no tables in %s", path)
	}
	for _, name := range tables {
		fmt.Fprintf(&q, "SELECT '%s', count(*) FROM \"%s\";\n", name, name)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(run(q.String()), "\n") {
		name, n, ok := strings.Cut(line, "|")
		var v int
		if _, err := fmt.Sscan(n, &v); !ok || err != nil {
			tb.Fatalf("sqlite3 count line %q", line)
		}
		counts[name] = v
	}
	if len(counts) != len(tables) {
		tb.Fatalf("sqlite3 counted %d of %d tables", len(counts), len(tables))
	}
	return counts
}

// oldSearchTurnTrigger is the search trigger as 0004 first created it:
// group_concat(... ORDER BY ...), which SQLite before 3.44 cannot parse.
const oldSearchTurnTrigger = `
DROP TRIGGER studio_operator_search_turn;
CREATE TRIGGER studio_operator_search_turn AFTER INSERT ON studio_operator_frames
WHEN new.frame_type = 'done'
 AND NOT EXISTS (SELECT 1 FROM studio_operator_fork_turns WHERE request_id = new.request_id) BEGIN
  INSERT INTO studio_operator_search_docs (conversation_id, request_id, content)
  SELECT new.conversation_id, new.request_id,
         coalesce(group_concat(
           CASE WHEN EXISTS (SELECT 1 FROM studio_operator_frames p
                             WHERE p.conversation_id = f.conversation_id AND p.sequence = f.sequence - 1
                               AND p.request_id = f.request_id AND p.frame_type = 'text'
                               AND json_extract(p.payload_json, '$.role') IS json_extract(f.payload_json, '$.role'))
                THEN json_extract(f.payload_json, '$.content')
                ELSE char(10) || json_extract(f.payload_json, '$.content') END, '' ORDER BY f.sequence), '')
  FROM studio_operator_frames f
  WHERE f.conversation_id = new.conversation_id AND f.request_id = new.request_id AND f.frame_type = 'text';
END;`

// TestMigrationReplacesTheNewSQLiteOnlyTrigger: a database that applied the
// first form of 0004 is unreadable by the distribution's sqlite3 until the
// migration replacing the trigger runs; after it, sqlite3 reads every table
// and the trigger still indexes a turn's text in order.
func TestMigrationReplacesTheNewSQLiteOnlyTrigger(t *testing.T) {
	t.Parallel()
	bin := distributionSQLite3(t)
	ctx := context.Background()
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "studio.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// The database as a binary with migrations up to 0005 left it.
	const before = 5
	if _, err := sqlstore.Migrate(ctx, s.w, dialect{}, ms[:before], storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, oldSearchTurnTrigger); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A sqlite3 older than 3.44 cannot read that schema at all.
	out, err := exec.Command(bin, "-bail", "-batch", path, `SELECT count(*) FROM studio_operator_frames;`).CombinedOutput()
	if v := sqlite3Version(t, bin); v < 3_044_000 {
		if err == nil || !strings.Contains(string(out), "malformed") {
			t.Fatalf("sqlite3 %d read the old trigger: %v %s", v, err, out)
		}
	}

	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Migrate(ctx, storetest.Epoch); err != nil || v != len(ms) {
		t.Fatalf("Migrate = %d, %v", v, err)
	}
	id := fillConversation(t, s, 3)
	// A turn written through the trigger, text out of insertion order.
	if _, err := s.w.ExecContext(ctx, `INSERT INTO studio_operator_turns (request_id, conversation_id, instruction, context_json, context_hash, status, created_at)
		VALUES ('late', ?1, 'q', '{}', 'h', 'completed', 1);
		INSERT INTO studio_operator_frames (conversation_id, sequence, request_id, frame_type, payload_json, created_at) VALUES
		  (?1, 33, 'late', 'text', '{"content":"lo wor","role":"assistant"}', 1),
		  (?1, 31, 'late', 'text', '{"content":"hi","role":"user"}', 1),
		  (?1, 32, 'late', 'text', '{"content":"hel","role":"assistant"}', 1),
		  (?1, 34, 'late', 'text', '{"content":"ld","role":"assistant"}', 1),
		  (?1, 35, 'late', 'done', '{}', 1);`, id); err != nil {
		t.Fatal(err)
	}
	var doc string
	if err := s.r.QueryRowContext(ctx, `SELECT content FROM studio_operator_search_docs WHERE request_id = 'late'`).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	if doc != "\nhi\nhello world" {
		t.Fatalf("search document = %q, want the text in sequence order, a new line where the role changes", doc)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	counts := sqlite3Counts(t, bin, path)
	if counts["studio_operator_frames"] != 35 || counts["studio_operator_search_docs"] < 4 || counts["schema_migrations"] != len(ms) {
		t.Fatalf("sqlite3 counts = %v", counts)
	}
}

// sqlite3Version is bin's version as SQLite numbers it (3.40.1: 3040001).
func sqlite3Version(tb testing.TB, bin string) int {
	tb.Helper()
	out, err := exec.Command(bin, "-version").Output()
	var major, minor, patch int
	if err == nil {
		_, err = fmt.Sscanf(string(out), "%d.%d.%d", &major, &minor, &patch)
	}
	if err != nil {
		tb.Fatalf("sqlite3 -version: %v (%s)", err, out)
	}
	return major*1_000_000 + minor*1_000 + patch
}
