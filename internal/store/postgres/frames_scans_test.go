package postgres

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// TestFramesNeverScanned: with sequential scans priced out of reach
// (enable_seqscan off), everything that reads frames by turn (CountFrames,
// ListFrames by request, the search text of a turn that ends, a turn that
// waits, forks) and removes them (purges, the foreign key checks of
// removing turns) finds them through an index: the frames table counts
// no sequential scan. The frames have no index by request; a statement, or
// a foreign key, on request_id alone would scan the table.
// (internal/store/sqlite's TestFramesPlans checks that the statements
// read a range of the primary key, not a conversation's whole history.)
func TestFramesNeverScanned(t *testing.T) {
	t.Parallel()
	dbURL := newDatabase(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	testServer.Exec(t, fmt.Sprintf(`ALTER DATABASE %q SET enable_seqscan = off`, name))
	s, err := Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	clock := storetest.Epoch
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	c, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: "c", Title: new("scans"), Now: tick()})
	if err != nil {
		t.Fatal(err)
	}
	last := func() int64 {
		cur, err := s.GetConversation(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return cur.LastSequence()
	}
	for i := range 6 {
		req := fmt.Sprint("r", i)
		if _, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: c.ID, RequestID: req, Instruction: "go",
			ContextJSON: []byte(`{}`), ContextHash: "h", ExpectedLastSequence: last(), Now: tick()}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartTurn(ctx, store.StartTurnParams{RequestID: req, Now: tick()}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: c.ID, RequestID: req, Now: tick(),
			Frames: []store.NewFrame{{Payload: protocol.TextPayload{Content: "word", Format: "markdown", Role: protocol.RoleAssistant}}}}); err != nil {
			t.Fatal(err)
		}
		if i == 2 { // one waits behind it, seen from the turn's start
			if _, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: c.ID, RequestID: "w", Instruction: "go",
				ContextJSON: []byte(`{}`), ContextHash: "h", ExpectedLastSequence: last() - 1, WhenBusy: protocol.WhenBusyEnqueue, Now: tick()}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.CountFrames(ctx, store.CountFramesParams{ConversationID: c.ID, RequestID: req, Type: protocol.FrameText}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: c.ID, RequestID: req, Limit: 10}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.FinishTurn(ctx, store.FinishTurnParams{RequestID: req, Status: store.TurnCompleted, Now: tick()}); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if _, _, err := s.FinishTurn(ctx, store.FinishTurnParams{RequestID: "w", Status: store.TurnCompleted, Now: tick()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ids int
	newID := func() string { ids++; return fmt.Sprint("copy", ids) }
	if _, err := s.ForkConversation(ctx, store.ForkConversationParams{SourceID: c.ID, ID: "fork", NewRequestID: newID, Now: tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PurgeFrames(ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 4, Now: tick()}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c", "fork"} {
		if _, err := s.DeleteConversation(ctx, store.DeleteConversationParams{ID: id, Now: tick()}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := s.PurgeDeletedConversations(ctx, store.PurgeDeletedConversationsParams{DeletedBefore: tick()}); err != nil || out.Turns == 0 {
		t.Fatalf("purge: %+v, %v", out, err)
	}
	// A backend reports its table counts when it ends: once the store's
	// have, the counts are whole.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", testServer.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testutil.Eventually(t, func() bool {
		var n int
		return db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1`, name).Scan(&n) == nil && n == 0
	}, "the store's connections ended")
	check, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var scans, indexScans int64
	if err := check.QueryRowContext(ctx, `SELECT seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 'studio_operator_frames'`).Scan(&scans, &indexScans); err != nil {
		t.Fatal(err)
	}
	if indexScans == 0 {
		t.Fatal("no index scan of the frames counted: the counts were not reported")
	}
	if scans != 0 {
		t.Fatalf("the frames table was scanned %d times (%d index scans)", scans, indexScans)
	}
}
