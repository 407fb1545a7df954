package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// TestFramesPlans runs what reads or removes frames by turn (appends,
// turns that wait, CountFrames, ListFrames by request, forks, purges,
// the search trigger) on a conversation of many turns, records every
// statement the store sends, and fails if the plan of any statement that
// touches the frames table reads it other than by a range of its primary
// key (conversation_id, sequence): a scan of the table, a conversation's
// whole history (where a statement means only part of it) or another
// index. The frames have no index by request; a statement that filters
// on request_id without its turn's range reads the whole conversation.
func TestFramesPlans(t *testing.T) {
	rec := &recorder{seen: map[string]bool{}}
	s, err := Open(filepath.Join(t.TempDir(), "studio.db"), func(o *options) { o.open = rec.open })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	clock := storetest.Epoch
	tick := func() (now time.Time) { clock = clock.Add(time.Second); return clock }
	if _, err := s.Migrate(ctx, tick()); err != nil {
		t.Fatal(err)
	}
	rec.on()

	c, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: "c", Title: ptr("plans"), Now: tick()})
	if err != nil {
		t.Fatal(err)
	}
	text := func(s string) store.NewFrame {
		return store.NewFrame{Payload: protocol.TextPayload{Content: s, Format: "markdown", Role: protocol.RoleAssistant}}
	}
	submit := func(req string, last int64, w protocol.WhenBusy) store.Turn {
		t.Helper()
		tr, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: c.ID, RequestID: req, Instruction: "go",
			ContextJSON: []byte(`{}`), ContextHash: "h", ExpectedLastSequence: last, WhenBusy: w, Now: tick()})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	last := func() int64 {
		t.Helper()
		cur, err := s.GetConversation(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return cur.LastSequence()
	}
	for i := range 6 {
		req := string(rune('a' + i))
		submit(req, last(), "")
		if _, err := s.StartTurn(ctx, store.StartTurnParams{RequestID: req, Now: tick()}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendFrames(ctx, store.AppendFramesParams{ConversationID: c.ID, RequestID: req, Now: tick(),
			Frames: []store.NewFrame{text("one "), text("two")}}); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			// A submission that saw the newest turn begin waits behind it.
			submit("w", last()-1, protocol.WhenBusyEnqueue)
		}
		if _, err := s.CountFrames(ctx, store.CountFramesParams{ConversationID: c.ID, RequestID: req, Type: protocol.FrameToolCall}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: c.ID, RequestID: req, Limit: 10}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.FinishTurn(ctx, store.FinishTurnParams{RequestID: req, Status: store.TurnCompleted, Now: tick()}); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if _, _, err := s.FinishTurn(ctx, store.FinishTurnParams{RequestID: "w", Status: store.TurnCompleted, Now: tick()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ids int
	newID := func() string { ids++; return fmt.Sprint("copy", ids) }
	if _, err := s.CountFrames(ctx, store.CountFramesParams{ConversationID: c.ID, RequestID: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForkConversation(ctx, store.ForkConversationParams{SourceID: c.ID, ID: "fork", UpToSequence: ptr(int64(8)),
		NewRequestID: newID, Now: tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PurgeFrames(ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 5, Now: tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForkConversation(ctx, store.ForkConversationParams{SourceID: c.ID, ID: "fork2",
		NewRequestID: newID, Now: tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteConversation(ctx, store.DeleteConversationParams{ID: "fork", Now: tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PurgeDeletedConversations(ctx, store.PurgeDeletedConversationsParams{DeletedBefore: tick()}); err != nil {
		t.Fatal(err)
	}

	var checked int
	for _, q := range rec.statements() {
		if !strings.Contains(q, "studio_operator_frames") || strings.HasPrefix(strings.TrimSpace(q), "INSERT INTO studio_operator_frames (") {
			continue
		}
		// Removing whole conversations reads all of each.
		whole := strings.HasPrefix(q, "DELETE FROM studio_operator_frames WHERE conversation_id IN")
		checkPlan(t, s.r, q, whole)
		checked++
	}
	if checked < 8 {
		t.Errorf("checked %d statements on the frames; the test no longer reaches them", checked)
	}

	// The search trigger's statement, new.* standing for the done frame.
	var trigger string
	if err := s.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'studio_operator_search_turn'`).Scan(&trigger); err != nil {
		t.Fatal(err)
	}
	body := trigger[strings.Index(trigger, "INSERT INTO studio_operator_search_docs"):strings.LastIndex(trigger, "END")]
	body = regexp.MustCompile(`new\.\w+`).ReplaceAllString(body, "?")
	checkPlan(t, s.r, strings.TrimSuffix(strings.TrimSpace(body), ";"), false)

	// Removing a turn looks for its frames through a foreign key's
	// columns: they must lead an index of the frames (not request_id
	// alone), or each turn removed scans the table.
	rows, err := s.r.QueryContext(ctx, `SELECT f.id, f."from", i.name FROM pragma_foreign_key_list('studio_operator_frames') f
		LEFT JOIN pragma_index_list('studio_operator_frames') i ON (SELECT name FROM pragma_index_info(i.name) WHERE seqno = 0) = f."from"
		WHERE f.seq = 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int
		var from string
		var index sql.NullString
		if err := rows.Scan(&id, &from, &index); err != nil {
			t.Fatal(err)
		}
		if !index.Valid {
			t.Errorf("the frames' foreign key %d on (%s, ...) leads no index: removing a parent scans the frames", id, from)
		}
	}
}

// checkPlan fails t if q's plan reads the frames table other than by a
// range of its primary key; whole allows a conversation's every frame.
func checkPlan(t *testing.T, db *sql.DB, q string, whole bool) {
	t.Helper()
	args := make([]any, strings.Count(q, "?")) // NULLs: the plan is the same
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	aliases := framesAliases(q)
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, d := range plan {
		f := strings.Fields(d)
		if len(f) < 2 || (f[0] != "SCAN" && f[0] != "SEARCH") || !slices.Contains(aliases, f[1]) {
			continue
		}
		pk := strings.Contains(d, "USING INDEX sqlite_autoindex_studio_operator_frames_1 (") ||
			strings.Contains(d, "USING COVERING INDEX sqlite_autoindex_studio_operator_frames_1 (")
		ranged := strings.Contains(d, "sequence")
		if f[0] == "SCAN" || !pk || (!ranged && !whole) {
			t.Errorf("plan reads the frames as %q, not by a range of their primary key:\n%s\nplan:\n  %s", d, q, strings.Join(plan, "\n  "))
		}
	}
}

// framesAliases are the names the frames table goes by in q.
func framesAliases(q string) []string {
	out := []string{"studio_operator_frames"}
	for _, m := range regexp.MustCompile(`studio_operator_frames\s+(?:AS\s+)?(\w+)`).FindAllStringSubmatch(q, -1) {
		switch strings.ToUpper(m[1]) {
		case "WHERE", "JOIN", "ON", "SET", "VALUES", "ORDER", "GROUP", "LIMIT", "LEFT", "INNER", "UNION":
		default:
			out = append(out, m[1])
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// recorder wraps the SQLite driver and records every statement sent to
// it once it is on.
type recorder struct {
	mu      sync.Mutex
	enabled bool
	seen    map[string]bool
	order   []string
}

func (r *recorder) on() { r.mu.Lock(); r.enabled = true; r.mu.Unlock() }

func (r *recorder) add(q string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.enabled && !r.seen[q] {
		r.seen[q] = true
		r.order = append(r.order, q)
	}
}

func (r *recorder) statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

func (r *recorder) open(dsn string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	d := db.Driver()
	db.Close()
	return sql.OpenDB(recConnector{dsn: dsn, d: d, r: r}), nil
}

type recConnector struct {
	dsn string
	d   driver.Driver
	r   *recorder
}

func (c recConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.d.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return recConn{conn, c.r}, nil
}

func (c recConnector) Driver() driver.Driver { return c.d }

type recConn struct {
	driver.Conn
	r *recorder
}

func (c recConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.r.add(q)
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c recConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.r.add(q)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c recConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.r.add(q)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c recConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}
