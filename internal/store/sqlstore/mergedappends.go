package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Merged appends. The appends the writer loop finds next to each other in
// a batch (every caller's AppendFrames, whatever the conversation) are not
// run one savepoint each: the loop reads the conversations they name in
// one query, checks each append against what it read (and what the appends
// before it in the batch changed), and writes every append that passed in
// one multi-row INSERT and one UPDATE per conversation. An append the
// checks refuse (not the active turn, fenced, an unknown conversation)
// fails alone with its own error and writes nothing; the others go on. If
// the merged writes themselves fail, they are rolled back to their
// savepoint and every append of the run goes the ordinary way, one
// savepoint each, so each caller gets its own answer. Nobody is answered
// before the batch's commit.
//
// The checks read rows without locking them, which holds only where one
// writer connection runs write transactions one at a time (a dialect that
// locks no rows): nothing can change between the read and the writes.

// appendJob is what an AppendFrames gives the writer loop besides its
// ordinary transaction: enough to merge it with the batch's other appends.
type appendJob struct {
	convID, reqID string
	now           time.Time
	payloads      []encodedPayload
	// instance is the writer's instance when the append is fenced (only
	// an instance's fence merges; a proposal's goes the ordinary way).
	instance string
	frames   []store.Frame // the stored frames, once the batch committed
}

// mergeable reports whether the appends of ctx may be merged by the loop:
// group commit on a dialect without row locks, and no fence but an
// instance's.
func (s *Store) mergeable(ctx context.Context) (instance string, ok bool) {
	if s.group == nil || s.locks.rows() {
		return "", false
	}
	f, fenced := store.FenceFrom(ctx)
	if !fenced {
		return "", true
	}
	if f.ProposalID != "" || f.Execute {
		return "", false
	}
	return f.Instance, true
}

// convState is a conversation as the merged appends see it: read once,
// then advanced by each append that passes.
type convState struct {
	found  bool
	active sql.NullString
	next   int64
	first  int64 // next_sequence as read: unchanged means no UPDATE
	now    time.Time
}

// errStartOver: the merged writes of a run failed; nothing undoes them
// but the transaction's rollback. The caller rolls it back and runs the
// returned appends the ordinary way in a new one.
var errStartOver = errors.New("merged appends failed: the batch starts over")

// runAppends runs the run of consecutive appends merged, in the physical
// transaction of the batch. When their merged writes failed it returns
// errStartOver with the appends to run the ordinary way; an append the
// checks refuse is answered here.
//
// The merged writes run in no savepoint: SQLite copies every page a
// savepoint's writes change into its sub-journal (in memory, 1 KiB
// chunks), and a run across many conversations changes pages all over the
// frames' indexes; allocating and freeing that journal at each batch was
// nearly half of a busy daemon's CPU. The checks before them (admit) leave
// them nothing to refuse, so they fail only when the database does.
func (g *group) runAppends(sqlTx *sql.Tx, bc *batchConn, run []*job) (retry []*job, err error) {
	ctx := bc.ctx
	c := conn{tx: sqlTx, d: g.s.d, batch: bc}
	convs, err := readConversations(ctx, c, appsOf(run))
	if err != nil {
		return run, nil // the ordinary way reports it, append by append
	}
	instances := make(map[string]error)
	owners := make(map[string]sql.NullString)
	passed := run[:0:0]
	rows := 0
	apps := make([]*appendJob, 0, len(run))
	for _, j := range run {
		if err := admit(ctx, c, j.app, convs, instances, owners); err != nil {
			j.finish(err)
			continue
		}
		rows += len(j.app.payloads)
		passed = append(passed, j)
		apps = append(apps, j.app)
	}
	if len(passed) == 0 {
		return nil, nil
	}
	werr := writeMerged(ctx, c, apps, convs, rows)
	if werr == nil && g.afterMerged != nil {
		werr = g.afterMerged(len(passed))
	}
	if werr != nil {
		for _, j := range passed {
			j.app.frames = nil
		}
		return passed, fmt.Errorf("%w: %w", errStartOver, werr)
	}
	for _, j := range passed {
		j.tx.appended = j.app.frames
		j.tx.touched = append(j.tx.touched[:0], j.app.convID)
		g.ran = append(g.ran, j)
	}
	return nil, nil
}

// admit checks an append against the conversation as the appends before
// it in the batch left it and, when it passes, gives its frames their
// sequences and advances the conversation.
func admit(ctx context.Context, c conn, a *appendJob, convs map[string]*convState, instances map[string]error, owners map[string]sql.NullString) error {
	st := convs[a.convID]
	if err := checkMerged(ctx, c, a, st, instances, owners); err != nil {
		return err
	}
	created := protocol.Time(ts(a.now))
	a.frames = make([]store.Frame, len(a.payloads))
	for i, p := range a.payloads {
		a.frames[i] = store.Frame{ConversationID: a.convID, Sequence: st.next + int64(i), RequestID: a.reqID,
			Type: p.typ, Payload: p.raw, CreatedAt: created}
	}
	st.next += int64(len(a.payloads))
	st.now = a.now
	return nil
}

func appsOf(run []*job) []*appendJob {
	apps := make([]*appendJob, len(run))
	for i, j := range run {
		apps[i] = j.app
	}
	return apps
}

// checkMerged makes an append's checks, in the order the ordinary
// AppendFrames makes them, so that it fails with the same error: the fence's
// instance, the conversation, its active turn, the turn's owner.
func checkMerged(ctx context.Context, c conn, a *appendJob, st *convState, instances map[string]error, owners map[string]sql.NullString) error {
	if a.instance != "" {
		err, ok := instances[a.instance]
		if !ok {
			err = instanceLive(ctx, &writeTx{conn: c}, a.instance)
			instances[a.instance] = err
		}
		if err != nil {
			return err
		}
	}
	if !st.found {
		return notFound("conversation", a.convID)
	}
	if !st.active.Valid || st.active.String != a.reqID {
		return protocol.Errorf(protocol.Conflict, "request %s is not the conversation's active turn", a.reqID)
	}
	if a.instance != "" {
		owner, ok := owners[a.reqID]
		if !ok {
			if err := c.QueryRowContext(ctx, `SELECT owner_instance FROM studio_operator_turns WHERE request_id = ?`, a.reqID).Scan(&owner); err != nil {
				return fmt.Errorf("append frames: %w", err)
			}
			owners[a.reqID] = owner
		}
		if owner.String != a.instance {
			return store.Fenced("turn %s is owned by %q, no longer by instance %s", a.reqID, owner.String, a.instance).
				With("instance", a.instance)
		}
	}
	return nil
}

// readConversations reads, in multi-row SELECTs, the conversations the
// appends name.
func readConversations(ctx context.Context, c conn, apps []*appendJob) (map[string]*convState, error) {
	convs := make(map[string]*convState, len(apps))
	args := make([]any, 0, len(apps))
	for _, a := range apps {
		if _, ok := convs[a.convID]; !ok {
			convs[a.convID] = &convState{}
			args = append(args, a.convID)
		}
	}
	for rest := args; len(rest) > 0; {
		n := frameChunk(len(rest))
		if err := func() error {
			rows, err := c.QueryContext(ctx, conversationReads[n], rest[:n]...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				var active sql.NullString
				var next int64
				if err := rows.Scan(&id, &active, &next); err != nil {
					return err
				}
				if st, ok := convs[id]; ok {
					*st = convState{found: true, active: active, next: next, first: next}
				}
			}
			return rows.Err()
		}(); err != nil {
			return nil, fmt.Errorf("append frames: %w", err)
		}
		rest = rest[n:]
	}
	return convs, nil
}

// writeMerged writes the frames of the appends that passed, in multi-row
// INSERTs across conversations, and advances each conversation's sequence
// once.
func writeMerged(ctx context.Context, c conn, passed []*appendJob, convs map[string]*convState, rows int) error {
	args := make([]any, 0, frameColumns*min(rows, frameInsertChunks[0]))
	n, left := frameChunk(rows), rows
	for _, a := range passed {
		created := ts(a.now)
		for _, f := range a.frames {
			args = append(args, a.convID, f.Sequence, a.reqID, string(f.Type), payloadText(f.Payload), created)
			if len(args) == frameColumns*n {
				if _, err := c.ExecContext(ctx, frameInserts[n], args...); err != nil {
					return fmt.Errorf("append frame: %w", err)
				}
				args, left = args[:0], left-n
				n = frameChunk(max(left, 1))
			}
		}
	}
	for _, a := range passed {
		st := convs[a.convID]
		if st.next == st.first {
			continue // advanced already (one UPDATE per conversation)
		}
		if _, err := c.ExecContext(ctx, `UPDATE studio_operator_conversations SET next_sequence = ?, updated_at = ? WHERE id = ?`,
			st.next, ts(st.now), a.convID); err != nil {
			return fmt.Errorf("advance sequence: %w", err)
		}
		st.first = st.next
	}
	return nil
}

// conversationReads is the merged appends' read of n conversations, for
// each n of frameInsertChunks.
var conversationReads = func() map[int]string {
	m := make(map[int]string, len(frameInsertChunks))
	for _, n := range frameInsertChunks {
		m[n] = `SELECT id, active_request_id, next_sequence FROM studio_operator_conversations WHERE id IN (?` +
			strings.Repeat(", ?", n-1) + `)`
	}
	return m
}()
