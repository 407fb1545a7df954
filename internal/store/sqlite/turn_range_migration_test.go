package sqlite

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// TestMigrateToTurnRanges: a database from before the turns' ranges
// (version 17) migrates with every frame; its turns get their ranges from
// their frames (an ended turn with none left the empty one, a waiting one
// none), the request index is gone, and the turns read, end, search and
// purge as ever.
func TestMigrateToTurnRanges(t *testing.T) {
	t.Parallel()
	s := migratedTo(t, 17)
	ctx, now := t.Context(), protocol.Timestamp(storetest.Epoch)
	turn := `INSERT INTO studio_operator_turns (request_id, conversation_id, instruction, context_json, context_hash, status, created_at, queue_order)
		VALUES (?, 'c1', 'go', '{}', 'h', ?, ?, ?)`
	frame := `INSERT INTO studio_operator_frames (conversation_id, sequence, request_id, frame_type, payload_json, created_at) VALUES ('c1', ?, ?, ?, ?, ?)`
	txt := func(s string) string { return `{"content":"` + s + `","format":"plain","role":"assistant"}` }
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO studio_operator_conversations (id, status, next_sequence, created_at, updated_at, active_request_id, retained_from_sequence)
			VALUES ('c1', 'active', 9, ?, ?, 'r3', 2)`, []any{now, now}},
		{turn, []any{"r0", "completed", now, nil}}, // its frame purged
		{turn, []any{"r1", "completed", now, nil}},
		{turn, []any{"r2", "failed", now, nil}},
		{turn, []any{"r3", "running", now, nil}},
		{turn, []any{"r4", "queued", now, 1}},
		{frame, []any{2, "r1", "text", txt("alpha"), now}},
		{frame, []any{3, "r1", "done", `{"outcome":"completed","lastSequence":3}`, now}},
		{frame, []any{4, "r2", "text", txt("beta"), now}},
		{frame, []any{5, "r2", "error", `{"error":{"code":"internal","message":"x"}}`, now}},
		{frame, []any{6, "r2", "done", `{"outcome":"failed","lastSequence":6}`, now}},
		{frame, []any{7, "r3", "text", txt("gamma"), now}},
		{frame, []any{8, "r3", "text", txt("delta"), now}},
	} {
		if _, err := s.w.ExecContext(ctx, st.q, st.args...); err != nil {
			t.Fatalf("%s: %v", st.q, err)
		}
	}
	if _, err := s.Migrate(ctx, storetest.Epoch.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for req, want := range map[string][2]any{"r0": {int64(0), int64(0)}, "r1": {int64(2), int64(3)}, "r2": {int64(4), int64(6)},
		"r3": {int64(7), nil}, "r4": {nil, nil}} {
		var first, last any
		if err := s.r.QueryRowContext(ctx, `SELECT first_sequence, last_sequence FROM studio_operator_turns WHERE request_id = ?`, req).Scan(&first, &last); err != nil {
			t.Fatal(err)
		}
		if first != want[0] || last != want[1] {
			t.Errorf("%s: range [%v, %v]; want [%v, %v]", req, first, last, want[0], want[1])
		}
	}
	var indexes int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE name = 'idx_operator_frames_request'`).Scan(&indexes); err != nil || indexes != 0 {
		t.Fatalf("the request index: %d, %v", indexes, err)
	}
	for req, want := range map[string]int64{"r0": 0, "r1": 2, "r2": 3, "r3": 2, "r4": 0} {
		if n, err := s.CountFrames(ctx, store.CountFramesParams{ConversationID: "c1", RequestID: req}); err != nil || n != want {
			t.Errorf("CountFrames(%s) = %d, %v; want %d", req, n, err, want)
		}
	}
	// The running turn ends: its text is found, the waiting one starts
	// after it, with its range.
	if _, _, err := s.FinishTurn(ctx, store.FinishTurnParams{RequestID: "r3", Status: store.TurnCompleted, Now: storetest.Epoch.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ListConversations(ctx, store.ListConversationsParams{Terms: []string{"gammadelta"}, Limit: 10})
	if err != nil || len(cs) != 1 {
		t.Fatalf("search after the migration: %+v, %v", cs, err)
	}
	fs, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: "c1", RequestID: "r4"})
	if err != nil || len(fs) != 1 || fs[0].Sequence != 10 {
		t.Fatalf("the promoted turn's frames: %+v, %v", fs, err)
	}
	if _, _, err := s.FinishTurn(ctx, store.FinishTurnParams{RequestID: "r4", Status: store.TurnCancelled, Now: storetest.Epoch.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteConversation(ctx, store.DeleteConversationParams{ID: "c1", Now: storetest.Epoch.Add(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if out, err := s.PurgeDeletedConversations(ctx, store.PurgeDeletedConversationsParams{DeletedBefore: storetest.Epoch.Add(4 * time.Hour)}); err != nil || out.Turns != 5 || out.Frames != 10 {
		t.Fatalf("purge: %+v, %v", out, err)
	}
}
