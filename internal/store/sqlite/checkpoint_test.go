package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// openCheckpointed is a migrated store whose checkpoint limit is pages
// and whose checkpointer's trickle delay is every.
func openCheckpointed(t *testing.T, pages int, every time.Duration) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "studio.db"), WALAutocheckpoint(pages), func(o *options) { o.checkpointEvery = every })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(t.Context(), storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheckpointerRunsByWALGrowth: the checkpointer copies the WAL once
// runPages limits were appended to it since its last run, not after every
// commit: commits of a page or two start no run until their pages add up,
// then one, and so on. (Its clock, for a trickle, is off here.)
func TestCheckpointerRunsByWALGrowth(t *testing.T) {
	t.Parallel()
	const limit = 8
	s := openCheckpointed(t, limit, time.Hour)
	var runs atomic.Int64
	var seen atomic.Uint32
	s.cp.ran = func(error) { runs.Add(1) }
	s.cp.seen = func(mx uint32) { seen.Store(mx) }
	wal := walIndex{path: s.path + "-shm"}
	defer wal.close()
	turns := storetest.ActiveTurns(t, s, 1, storetest.Epoch)
	// Where the checkpointer's count starts: the WAL as it is now, or
	// after its first run if the migrations' pages started one.
	testutil.Eventually(t, func() bool { mx, ok := wal.frames(); return ok && seen.Load() == mx }, "the checkpointer saw the set-up's commits")
	base := runs.Load()
	prev, _ := wal.frames()
	var appended uint32 // frames appended since the count started
	for i := range 40 * runPages {
		if _, err := s.AppendFrames(context.Background(), store.AppendFramesParams{ConversationID: turns[0].ConversationID,
			RequestID: turns[0].RequestID, Frames: []store.NewFrame{{Payload: protocol.TextPayload{Content: "a line", Format: "markdown", Role: "assistant"}}},
			Now: storetest.Epoch}); err != nil {
			t.Fatal(err)
		}
		mx, ok := wal.frames()
		if !ok {
			t.Fatal("the wal-index header is unreadable")
		}
		if mx < prev { // the writer's backstop started the WAL over
			appended += mx
		} else {
			appended += mx - prev
		}
		prev = mx
		testutil.Eventually(t, func() bool { return seen.Load() == mx }, fmt.Sprintf("the checkpointer saw commit %d", i))
		if got, most := runs.Load()-base, int64(appended/(runPages*limit))+1; got > most {
			t.Fatalf("after %d commits (%d WAL frames) the checkpointer ran %d times; at most %d for a run every %d frames",
				i+1, appended, got, most, runPages*limit)
		}
	}
	if got, least := runs.Load()-base, int64(appended/(runPages*limit))-1; got < max(least, 1) {
		t.Fatalf("%d WAL frames appended, %d checkpointer runs; want at least %d", appended, got, max(least, 1))
	}
}

// TestWALStartsOverUnderLoad: under a steady load of appenders the WAL
// starts over (the writer's backstop, between two batches) and its file
// never grows past the backstop and a batch's pages.
func TestWALStartsOverUnderLoad(t *testing.T) {
	t.Parallel()
	const limit = 8
	s := openCheckpointed(t, limit, checkpointEvery)
	turns := storetest.ActiveTurns(t, s, 8, storetest.Epoch)
	text := protocol.TextPayload{Content: strings.Repeat("x", 2048), Format: "markdown", Role: "assistant"}
	wal := walIndex{path: s.path + "-shm"}
	defer wal.close()
	var rewound atomic.Int64
	var mu sync.Mutex
	var prev uint32
	var wg sync.WaitGroup
	for _, tr := range turns {
		wg.Go(func() {
			for range 60 {
				if _, err := s.AppendFrames(context.Background(), store.AppendFramesParams{ConversationID: tr.ConversationID,
					RequestID: tr.RequestID, Frames: []store.NewFrame{{Payload: text}}, Now: storetest.Epoch}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if mx, ok := wal.frames(); ok {
					if mx < prev {
						rewound.Add(1)
					}
					prev = mx
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if rewound.Load() == 0 {
		t.Fatal("the WAL never started over")
	}
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// A batch of 8 appends of 2 KiB changes a few dozen pages at most.
	const batch = 64
	if most := int64(32 + (backstopPages*limit+batch)*(4096+24)); fi.Size() > most {
		t.Fatalf("the WAL grew to %d bytes; at most %d (the backstop's %d pages and a batch)", fi.Size(), most, backstopPages*limit)
	}
}
