package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// checkpointed reports whether the database file holds every page of the
// database: the WAL was copied into it. Migrations alone leave it the one
// page that WAL mode wrote.
func checkpointed(t *testing.T, s *Store) bool {
	t.Helper()
	var pages, size int64
	if err := s.r.QueryRowContext(t.Context(), `SELECT page_count, page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&pages, &size); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		t.Fatal(err)
	}
	return pages > 1 && fi.Size() == pages*size
}

// TestCheckpointerCopiesTheWAL: a commit far below the writer's own
// autocheckpoint has the checkpointer copy the WAL into the database file.
func TestCheckpointerCopiesTheWAL(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	if checkpointed(t, s) {
		t.Fatal("the migrations' pages are in the database file before any checkpoint")
	}
	storetest.ActiveTurns(t, s, 1, storetest.Epoch)
	testutil.Eventually(t, func() bool { return checkpointed(t, s) }, "the WAL copied into the database file")
}

// TestCheckpointerFailureLeavesItToTheWriter: when the checkpointer's runs
// fail, the writer's backstop autocheckpoint still copies the WAL, and
// the writes go on.
func TestCheckpointerFailureLeavesItToTheWriter(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "studio.db"), WALAutocheckpoint(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(t.Context(), storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int64
	s.cp.ran = func(err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	if err := s.cp.db.Close(); err != nil { // every run fails from here on
		t.Fatal(err)
	}
	turns := storetest.ActiveTurns(t, s, 1, storetest.Epoch)
	text := protocol.TextPayload{Content: strings.Repeat("x", 4096), Format: "markdown", Role: "assistant"}
	for range 4 * backstopPages * 8 {
		if _, err := s.AppendFrames(context.Background(), store.AppendFramesParams{ConversationID: turns[0].ConversationID,
			RequestID: turns[0].RequestID, Frames: []store.NewFrame{{Payload: text}}, Now: storetest.Epoch}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, func() bool { return failed.Load() > 0 }, "a failed checkpointer run")
	var size int64
	if err := s.r.QueryRowContext(t.Context(), `PRAGMA page_size`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.path); err != nil || fi.Size() <= size {
		t.Fatalf("the writer did not checkpoint the WAL while the checkpointer failed: %v, %v", fi, err)
	}
}
