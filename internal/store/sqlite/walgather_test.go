package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// walPath is the WAL's path as SQLite names it to the VFS.
func (s *Store) walPath() string {
	abs, err := filepath.Abs(s.path)
	if err != nil {
		return s.path + "-wal"
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs + "-wal"
}

// walFilesAt returns the open WAL files at path .
func walFilesAt(path string) []*walBuffer {
	gather.mu.Lock()
	defer gather.mu.Unlock()
	var bs []*walBuffer
	for _, b := range gather.files {
		if b.path == path {
			bs = append(bs, b)
		}
	}
	return bs
}

// walWrites sums the counters of the open WAL files at path: SQLite's
// writes and the OS's.
func walWrites(path string) (writes, osWrites int64) {
	for _, b := range walFilesAt(path) {
		writes += b.writes.Load()
		osWrites += b.osWrites.Load()
	}
	return writes, osWrites
}

func textFrames(n, size int) []store.NewFrame {
	fs := make([]store.NewFrame, n)
	for i := range fs {
		fs[i] = store.NewFrame{Payload: protocol.TextPayload{Content: strings.Repeat("x", size), Format: "markdown", Role: "assistant"}}
	}
	return fs
}

// A commit of many pages reaches the OS in a few writes, not two per
// page: SQLite's writes of the frames are gathered until the commit's sync.
func TestWALCommitReachesOSInFewWrites(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	turn := storetest.ActiveTurns(t, s, 1, storetest.Epoch)[0]
	w0, os0 := walWrites(s.walPath())
	// 200 frames of 8 KiB: some 400 pages in one transaction.
	if _, err := s.AppendFrames(t.Context(), store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID,
		Frames: textFrames(200, 8<<10), Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	w1, os1 := walWrites(s.walPath())
	writes, osWrites := w1-w0, os1-os0
	if writes < 600 {
		t.Fatalf("SQLite wrote %d times into the WAL: the commit was meant to be ~400 pages (two writes each)", writes)
	}
	t.Logf("SQLite's writes into the WAL %d, the OS's %d", writes, osWrites)
	// Two writes per frame (header, page) of 4 KiB pages, handed to the
	// OS in pieces of gatherChunk: one per piece, and one more for the
	// WAL's header after a restart.
	bytes := writes / 2 * (4096 + 24)
	if most := bytes/gatherChunk + 2; osWrites > most {
		t.Fatalf("SQLite's %d writes reached the OS as %d writes, want at most %d", writes, osWrites, most)
	}
}

// Readers (the store's pool, and a connection of another program's) see
// every frame whose append has returned, while the writer goes on
// writing other commits.
func TestWALReadersSeeEveryCommittedFrame(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	const appenders, each = 8, 40
	turns := storetest.ActiveTurns(t, s, appenders, storetest.Epoch)
	other, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.ToSlash(s.walPath()[:len(s.walPath())-len("-wal")]),
		RawQuery: "mode=ro&_pragma=busy_timeout(10000)"}).String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var wg sync.WaitGroup
	for i, turn := range turns {
		wg.Go(func() {
			for range each {
				// Frames of 3 KiB, so that commits span pages and the
				// buffer holds several pages when readers look.
				fs, err := s.AppendFrames(t.Context(), store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID,
					Frames: textFrames(1+i%3, 3<<10), Now: storetest.Epoch})
				if err != nil {
					t.Error(err)
					return
				}
				last := fs[len(fs)-1].Sequence
				got, err := s.ListFrames(t.Context(), store.ListFramesParams{ConversationID: turn.ConversationID, AfterSequence: last - 1, Limit: 1})
				if err != nil || len(got) != 1 || got[0].Sequence != last {
					t.Errorf("the reader pool after append %d: %v, %v", last, got, err)
					return
				}
				var n int64
				if err := other.QueryRow("SELECT max(sequence) FROM studio_operator_frames WHERE conversation_id = ?", turn.ConversationID).Scan(&n); err != nil || n < last {
					t.Errorf("another connection after append %d: max %d, %v", last, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A write the OS refuses fails the commit that needed it, and loses
// nothing committed before it or after it; the file reopens whole.
func TestWALWriteFailureFailsTheCommit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "studio.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(t.Context(), storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	turn := storetest.ActiveTurns(t, s, 1, storetest.Epoch)[0]
	appendText := func(text string) error {
		_, err := s.AppendFrames(t.Context(), store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID,
			Frames: []store.NewFrame{{Payload: protocol.TextPayload{Content: text, Format: "markdown", Role: "assistant"}}}, Now: storetest.Epoch})
		return err
	}
	if err := appendText("before"); err != nil {
		t.Fatal(err)
	}
	wal := s.walPath()
	gatherFaults.Store(wal, struct{}{})
	err = appendText("refused")
	gatherFaults.Delete(wal)
	if err == nil {
		t.Fatal("an append whose WAL write failed succeeded")
	}
	if err := appendText("after"); err != nil {
		t.Fatalf("the append after the failed one: %v", err)
	}
	check := func(s *Store, when string) {
		t.Helper()
		fs, err := s.ListFrames(t.Context(), store.ListFramesParams{ConversationID: turn.ConversationID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range fs {
			for _, text := range []string{"before", "refused", "after"} {
				if strings.Contains(string(f.Payload), `"`+text+`"`) {
					got = append(got, text)
				}
			}
		}
		if fmt.Sprint(got) != "[before after]" {
			t.Fatalf("%s: text frames %q, want [before after]", when, got)
		}
	}
	check(s, "open")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	check(s, "reopened")
	var ok string
	if err := s.w.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
}

// The VFS is the writer's only while the writer syncs every commit.
func TestWriterBelowFullSyncIsRefused(t *testing.T) {
	t.Parallel()
	if err := registerGatherVFS(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "studio.db")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.ToSlash(path),
		RawQuery: "vfs=" + gatherVFSName + "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"}).String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := checkWriterSyncs(db); err == nil || errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("a writer at synchronous=NORMAL: %v, want refused", err)
	}
}

// A WAL that SQLite pads to sectors (the device lacks powersafe
// overwrite: it syncs mid-frame and writes the rest after) is written
// through, each write as SQLite makes it.
func TestWALWithoutPowersafeOverwriteIsWrittenThrough(t *testing.T) {
	t.Parallel()
	if err := registerGatherVFS(); err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "padded.db")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.ToSlash(path),
		RawQuery: "vfs=" + gatherVFSName + "&psow=0&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"}).String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (x TEXT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 50) INSERT INTO t SELECT printf('%.*c', 3000, 'x') FROM n"); err != nil {
		t.Fatal(err)
	}
	bs := walFilesAt(path + "-wal")
	if len(bs) != 1 {
		t.Fatalf("%d WAL files open at %s, want 1", len(bs), path+"-wal")
	}
	if !bs[0].direct || bs[0].writes.Load() == 0 || bs[0].writes.Load() != bs[0].osWrites.Load() {
		t.Fatalf("direct %v, SQLite's writes %d, the OS's %d: want written through", bs[0].direct, bs[0].writes.Load(), bs[0].osWrites.Load())
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 50 {
		t.Fatalf("count %d, %v", n, err)
	}
}
