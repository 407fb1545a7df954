package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Batched appends on an engine that locks rows (Config.AppendWriters,
// PostgreSQL). Each AppendFrames alone is a transaction of several round
// trips and a commit holding a pool connection; here a few writer loops
// take every append waiting (whatever the conversation) and run them in
// one transaction on one connection, as the merged appends of group commit
// do (mergedappends.go): the batch's conversation rows are read and locked
// in one statement, in the order of their ids (every batch of every daemon
// locks in that order, so two batches never deadlock), then the turns'
// owners in one more; each append is checked in Go, in the ordinary
// path's order and with its errors (the fence's instance, the
// conversation, its active turn, the turn's owner); the frames of those
// that pass and their conversations' next sequences are written in one
// statement, one more notifies the other processes, and one commit makes
// it all durable before any caller is answered. (The fence's instance is
// read after the conversations' lock, the ordinary path reads it before:
// the later read sees at least as much.)
//
// An append a check refuses fails alone and writes nothing. When anything
// else goes wrong before the commit (a lock wait that times out, a
// deadlock with an ordinary transaction, a lost connection), the batch is
// rolled back and each of its appends runs the ordinary way, in a
// transaction of its own with its own retries and its own error. A commit
// that fails fails every append of the batch, as an ordinary commit's
// failure fails its one append.
//
// Fencing holds as on the ordinary path: the owner is read after the
// conversation's row is locked, in a statement of its own (READ COMMITTED:
// it sees every takeover committed before the lock was granted), and a
// takeover locks that row before it changes the owner.

// DefaultAppendWriters is the writer loops of batched appends when
// Config.AppendWriters asks for them without a number: enough to keep a
// batch gathering while others wait for their commits, few enough to leave
// the pool's other connections to the other writes and the reads.
const DefaultAppendWriters = 4

// errAlone answers an append that the batch could not write: the caller
// runs it the ordinary way.
var errAlone = errors.New("append: run alone")

// BatchAppender is a Dialect whose engine takes arrays as parameters and
// runs writes concurrently under row locks (PostgreSQL): it gives the
// batched appends their statements, each for any number of rows, so that a
// batch costs the same few round trips whatever its size.
type BatchAppender interface {
	AppendQueries() AppendQueries
	// NotifyFramesBatch is FrameNotifier.NotifyFrames for each
	// conversationIDs[i] and frames[i], in one statement.
	NotifyFramesBatch(ctx context.Context, tx *sql.Tx, conversationIDs []string, frames [][]store.Frame) error
}

// AppendQueries are the statements of the batched appends. Each takes
// slices ([]string, []int64, []float64) as its parameters, one per column.
type AppendQueries struct {
	// Lock reads id, active_request_id and next_sequence of the
	// conversations whose ids are its parameter and locks their rows for
	// update, in the order of the ids' bytes whatever the collation.
	Lock string
	// Owners reads request_id and owner_instance of the turns whose
	// request ids are its parameter.
	Owners string
	// Write writes frames and advances their conversations, in one
	// statement: the frames' conversation ids, sequences, request ids,
	// frame types, payloads (JSON text) and created_at; then the
	// conversations' ids, next sequences and updated_at.
	Write string
}

// appendBatcher is the writer loops of batched appends.
type appendBatcher struct {
	s *Store
	d BatchAppender
	q AppendQueries
	b *batcher[*lockedJob]
}

// lockedJob is one AppendFrames handed to the loops.
type lockedJob struct {
	answer
	app *appendJob
}

func newAppendBatcher(s *Store, d BatchAppender, writers, max int) *appendBatcher {
	b := &appendBatcher{s: s, d: d, q: d.AppendQueries()}
	// Yields while that brings more: the callers the last commits woke.
	b.b = newBatcher(batcherParams[*lockedJob]{Max: max, Loops: writers, Yields: -1, Run: b.runBatch})
	return b
}

// submit hands the append to the loops and returns after its batch's
// commit (errAlone: run it the ordinary way).
func (b *appendBatcher) submit(ctx context.Context, a *appendJob) error {
	return b.b.submit(ctx, &lockedJob{app: a})
}

// close stops the loops after their batches; appends still waiting fail
// with errClosed.
func (b *appendBatcher) close() { b.b.close() }

// runBatch reports a gathered batch's size and runs it.
func (b *appendBatcher) runBatch(batch []*lockedJob) {
	if o := b.s.observer(); o != nil {
		o.WriterBatch(len(batch))
	}
	b.run(batch)
}

// run writes the batch in one transaction and answers every append of it.
func (b *appendBatcher) run(batch []*lockedJob) {
	live := batch[:0:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.finish(err)
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	// The batch's own context: one caller's cancellation must not take the
	// others' transaction with it (statement_timeout bounds it).
	ctx := context.Background()
	sqlTx, err := b.s.writer.BeginTx(ctx, nil)
	if err != nil {
		alone(live)
		return
	}
	passed, err := b.write(ctx, sqlTx, live)
	if err != nil {
		_ = sqlTx.Rollback()
		alone(passed)
		return
	}
	if len(passed) == 0 {
		_ = sqlTx.Rollback()
		return
	}
	if err := sqlTx.Commit(); err != nil {
		err = fmt.Errorf("commit: %w", err)
		if !errors.Is(err, sql.ErrTxDone) && store.Transient(err) {
			err = &store.CommitUnknownError{Err: err} // sent and not answered: it may have landed
		}
		for _, j := range passed {
			j.finish(err)
		}
		return
	}
	for _, j := range passed {
		b.s.committed(&writeTx{appended: j.app.frames, touched: []string{j.app.convID}})
		j.finish(nil)
	}
}

// write runs the batch's statements in sqlTx, up to the commit. It
// answers the appends the checks refuse and returns the others: those to
// commit or, with an error (the transaction is broken), to run alone.
func (b *appendBatcher) write(ctx context.Context, sqlTx *sql.Tx, live []*lockedJob) (passed []*lockedJob, err error) {
	c := conn{tx: sqlTx, d: b.s.d}
	convs, err := b.lock(ctx, sqlTx, live)
	if err != nil {
		return live, err
	}
	owners, err := b.owners(ctx, sqlTx, live, convs)
	if err != nil {
		return live, err
	}
	instances := make(map[string]error)
	passed = live[:0:0]
	for i, j := range live {
		err := admit(ctx, c, j.app, convs, instances, owners)
		var pe *protocol.Error
		switch {
		case err == nil:
			passed = append(passed, j)
		case errors.As(err, &pe):
			j.finish(err) // refused: it fails alone
		default:
			// A failed statement: the transaction is broken.
			return append(passed, live[i:]...), err
		}
	}
	if len(passed) == 0 {
		return nil, nil
	}
	if err := b.insert(ctx, sqlTx, passed, convs); err != nil {
		return passed, err
	}
	if err := b.notify(ctx, sqlTx, passed); err != nil {
		return passed, fmt.Errorf("notify: %w", err)
	}
	return passed, nil
}

// lock reads the batch's conversations and locks their rows, in one
// statement.
func (b *appendBatcher) lock(ctx context.Context, sqlTx *sql.Tx, live []*lockedJob) (map[string]*convState, error) {
	convs := make(map[string]*convState, len(live))
	ids := make([]string, 0, len(live))
	for _, j := range live {
		if _, ok := convs[j.app.convID]; !ok {
			convs[j.app.convID] = &convState{}
			ids = append(ids, j.app.convID)
		}
	}
	rows, err := sqlTx.QueryContext(ctx, b.q.Lock, ids)
	if err != nil {
		return nil, fmt.Errorf("append frames: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var active sql.NullString
		var next int64
		if err := rows.Scan(&id, &active, &next); err != nil {
			return nil, fmt.Errorf("append frames: %w", err)
		}
		if st, ok := convs[id]; ok {
			*st = convState{found: true, active: active, next: next, first: next}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("append frames: %w", err)
	}
	return convs, nil
}

// owners reads, in one statement after the conversations' lock, the
// owners of the turns the fenced appends name, where they are their
// conversations' active turns (the owner check reads them only then);
// checkMerged reads one it misses itself.
func (b *appendBatcher) owners(ctx context.Context, sqlTx *sql.Tx, live []*lockedJob, convs map[string]*convState) (map[string]sql.NullString, error) {
	owners := make(map[string]sql.NullString)
	seen := make(map[string]bool)
	var ids []string
	for _, j := range live {
		a, st := j.app, convs[j.app.convID]
		if a.instance == "" || seen[a.reqID] || !st.found || !st.active.Valid || st.active.String != a.reqID {
			continue
		}
		seen[a.reqID] = true
		ids = append(ids, a.reqID)
	}
	if len(ids) == 0 {
		return owners, nil
	}
	rows, err := sqlTx.QueryContext(ctx, b.q.Owners, ids)
	if err != nil {
		return nil, fmt.Errorf("append frames: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var owner sql.NullString
		if err := rows.Scan(&id, &owner); err != nil {
			return nil, fmt.Errorf("append frames: %w", err)
		}
		owners[id] = owner
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("append frames: %w", err)
	}
	return owners, nil
}

// insert writes the frames of the appends that passed and advances each
// conversation's sequence, in one statement.
func (b *appendBatcher) insert(ctx context.Context, sqlTx *sql.Tx, passed []*lockedJob, convs map[string]*convState) error {
	var (
		conv, req, typ, payload []string
		seq                     []int64
		created                 []float64
	)
	for _, j := range passed {
		a := j.app
		at := ts(a.now)
		for _, f := range a.frames {
			conv, seq, req = append(conv, a.convID), append(seq, f.Sequence), append(req, a.reqID)
			typ, payload, created = append(typ, string(f.Type)), append(payload, payloadText(f.Payload)), append(created, at)
		}
	}
	var ids []string
	var next []int64
	var updated []float64
	for id, st := range convs {
		if st.found && st.next != st.first {
			ids, next, updated = append(ids, id), append(next, st.next), append(updated, ts(st.now))
		}
	}
	if _, err := sqlTx.ExecContext(ctx, b.q.Write, conv, seq, req, typ, payload, created, ids, next, updated); err != nil {
		return fmt.Errorf("append frames: %w", err)
	}
	return nil
}

// notify tells the other processes the batch's frames, per conversation
// in the order the batch wrote them, in one statement.
func (b *appendBatcher) notify(ctx context.Context, sqlTx *sql.Tx, passed []*lockedJob) error {
	var ids []string
	var frames [][]store.Frame
	at := make(map[string]int, len(passed))
	for _, j := range passed {
		a := j.app
		i, ok := at[a.convID]
		if !ok {
			i = len(ids)
			at[a.convID] = i
			ids = append(ids, a.convID)
			frames = append(frames, nil)
		}
		frames[i] = append(frames[i], a.frames...)
	}
	return b.d.NotifyFramesBatch(ctx, sqlTx, ids, frames)
}

// alone answers appends the batch did not write: each runs the ordinary
// way.
func alone(jobs []*lockedJob) {
	for _, j := range jobs {
		j.app.frames = nil
		j.finish(errAlone)
	}
}

// batchable reports whether the append of ctx may go to the batched
// appends: they run, and its fence (if any) is an instance's alone, read
// without a lock as the ordinary path reads it.
func (s *Store) batchable(ctx context.Context) (instance string, ok bool) {
	if s.appends == nil {
		return "", false
	}
	f, fenced := store.FenceFrom(ctx)
	if !fenced {
		return "", true
	}
	if f.ProposalID != "" || f.Execute || f.Hold {
		return "", false
	}
	return f.Instance, true
}

// AppendsWaiting is the appends waiting for a writer loop of the batched
// appends (0 without them): how far the loops are behind.
func (s *Store) AppendsWaiting() int {
	if s.appends == nil {
		return 0
	}
	return s.appends.b.waiting()
}
