package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/studio/operator/internal/store"
)

// Batched appends on an engine that locks rows (Config.AppendWriters,
// PostgreSQL). Each AppendFrames alone is a transaction of several round
// trips and a commit holding a pool connection; here a few writer loops
// take every append waiting (whatever the conversation) and run them in
// one transaction on one connection, as the merged appends of group commit
// do (mergedappends.go): in one round trip when the batch's conversations
// are as this process's last commits left them (guarded.go), otherwise in
// two. The first sends BEGIN, the
// statement that reads and locks the batch's conversation rows (in the
// order of their ids: every batch of every daemon locks in that order, so
// two batches never deadlock), and after it the reads of the fenced
// appends' instances and turns' owners; each append is then checked in
// Go, in the ordinary path's order and with its errors (the fence's
// instance, the conversation, its active turn, the turn's owner); the
// second sends the statement that writes the frames of those that pass
// and their conversations' next sequences, the one that notifies the
// other processes, and COMMIT, which makes it all durable before any
// caller is answered. Round trips, not statements, are what a frame waits
// for between its append and its commit: each is a wake-up of the
// server's backend and of this writer, and on a busy machine each may
// wait for a processor. (The fence's instance is read after the
// conversations' lock, the ordinary path reads it before: the later read
// sees at least as much.)
//
// An append a check refuses fails alone and writes nothing. When anything
// else goes wrong before the commit (a lock wait that times out, a
// deadlock with an ordinary transaction, a write the server refuses), the
// batch is rolled back and each of its appends runs the ordinary way, in a
// transaction of its own with its own retries and its own error. A commit
// that fails fails every append of the batch, as an ordinary commit's
// failure fails its one append; so does a connection lost in the second
// round trip, since its COMMIT may have run (a commit of unknown outcome).
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

// BatchAppender is a Dialect whose engine takes arrays as parameters,
// runs writes concurrently under row locks and pipelines statements
// (PostgreSQL): it gives the batched appends their statements, each for
// any number of rows, and sends several of them in one round trip, so that
// a batch costs two round trips whatever its size.
type BatchAppender interface {
	AppendQueries() AppendQueries
	// NotifyFramesStatement is the statement that does
	// FrameNotifier.NotifyFrames for each conversationIDs[i] and
	// frames[i], with its arguments; guarded, it notifies nothing unless
	// the transaction's Guard held.
	NotifyFramesStatement(conversationIDs []string, frames [][]store.Frame, guarded bool) (query string, args []any)
	// Pipelined runs fn on a connection of the writer's pool and reports
	// whether it could (an error: fn did not run, nothing was sent). A
	// connection fn leaves inside a transaction is not given back to the
	// pool.
	Pipelined(ctx context.Context, fn func(Round)) error
}

// Round sends statements in one round trip and reads their answers in
// order. When one fails, the server ran none after it: failed is its
// index. When the connection fails instead, failed is -1, and which
// statements ran is unknown.
type Round func(ctx context.Context, stmts ...Piped) (failed int, err error)

// Piped is a statement of a Round.
type Piped struct {
	Query string
	Args  []any
	// Row, when set, is called for each row of the answer with its Scan.
	Row func(scan func(dest ...any) error) error
}

// AppendQueries are the statements of the batched appends. Each takes
// slices ([]string, []int64, []float64) as its parameters, one per column.
type AppendQueries struct {
	// Lock reads id, active_request_id and next_sequence of the
	// conversations whose ids are its parameter and locks their rows for
	// update, in the order of the ids' bytes whatever the collation.
	Lock string
	// Instances reads id, when reaped (its own column, or its reap's) and
	// stopped_at of the instances whose ids are its parameter: what
	// instanceLive reads of one.
	Instances string
	// Owners reads request_id and owner_instance of the turns whose
	// request ids are its parameter.
	Owners string
	// Write writes frames and advances their conversations, in one
	// statement: the frames' conversation ids, sequences, request ids,
	// frame types, payloads (JSON text) and created_at; then the
	// conversations' ids, next sequences and updated_at.
	Write string
	// Guard checks, in a statement of its own after Lock, what the one
	// round trip's batch expects (guarded.go): the conversations' ids,
	// their next sequences and active request ids; the fenced appends'
	// instances (registered, not reaped, not stopped); the turns' request
	// ids and their owners. It answers one row, whether all of it holds,
	// and records the answer in the transaction for GuardedWrite and the
	// guarded notification.
	Guard string
	// GuardedWrite is Write, writing nothing unless the transaction's
	// Guard held.
	GuardedWrite string
}

// appendBatcher is the writer loops of batched appends.
type appendBatcher struct {
	s *Store
	d BatchAppender
	q AppendQueries
	b *batcher[*lockedJob]
	// known is what the one round trip expects of the conversations.
	known knownSequences
}

// lockedJob is one AppendFrames handed to the loops.
type lockedJob struct {
	answer
	app *appendJob
}

func newAppendBatcher(s *Store, d BatchAppender, writers, max int) *appendBatcher {
	b := &appendBatcher{s: s, d: d, q: d.AppendQueries(), known: knownSequences{next: make(map[string]int64)}}
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

// run writes the batch in one transaction of two round trips and answers
// every append of it.
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
	if err := b.d.Pipelined(ctx, func(round Round) {
		if !b.writeGuarded(ctx, round, live) {
			b.write(ctx, round, live)
		}
	}); err != nil {
		alone(live)
	}
}

// write runs the batch's transaction: BEGIN, the conversations' lock and
// the reads the checks need (the instances, the turns' owners) in the
// first round trip; the frames, their notification and COMMIT in the
// second. Every append is answered: refused by its checks, committed,
// failed with the commit, or handed back to run alone.
//
// Durability before visibility: the notification that carries the frames
// to the other processes is sent in the transaction, and PostgreSQL
// delivers a notification only once its transaction has committed (and
// never when it rolls back); this process's streams get them from
// committed, after COMMIT answered. So no stream anywhere sees a frame
// before it is durable, though the notification travels in the same
// round trip as the frames and the COMMIT.
func (b *appendBatcher) write(ctx context.Context, round Round, live []*lockedJob) {
	rollback := func() { _, _ = round(ctx, Piped{Query: "ROLLBACK"}) }
	convs, reads := b.reads(live)
	if _, err := round(ctx, reads...); err != nil {
		rollback()
		alone(live)
		return
	}
	passed := live[:0:0]
	for _, j := range live {
		// The reads left admit nothing to read (conn{}: no queries).
		if err := admit(ctx, conn{}, j.app, convs.convs, convs.instances, convs.owners); err != nil {
			j.finish(err) // refused: it fails alone
			continue
		}
		passed = append(passed, j)
	}
	if len(passed) == 0 {
		rollback()
		return
	}
	ids, frames := notified(passed)
	notifyQuery, notifyArgs := b.d.NotifyFramesStatement(ids, frames, false)
	failed, err := round(ctx, Piped{Query: b.q.Write, Args: b.rows(passed, convs.convs)},
		Piped{Query: notifyQuery, Args: notifyArgs}, Piped{Query: "COMMIT"})
	if err == nil {
		b.known.learn(convs.convs)
	}
	b.answer(ctx, round, passed, failed, 2, err)
}

// answer answers the appends of a batch whose statements up to COMMIT
// were sent in one round trip, commit the index of COMMIT among them:
// committed, handed back to run alone when the server refused a statement
// before COMMIT (it then ran no COMMIT), or failed with the commit.
func (b *appendBatcher) answer(ctx context.Context, round Round, passed []*lockedJob, failed, commit int, err error) {
	switch {
	case err == nil:
		for _, j := range passed {
			b.s.committed(&writeTx{appended: j.app.frames, touched: []string{j.app.convID}})
			j.finish(nil)
		}
	case failed >= 0 && failed < commit:
		// Nothing landed: each append runs alone.
		_, _ = round(ctx, Piped{Query: "ROLLBACK"})
		alone(passed)
	default:
		// COMMIT failed, or the connection did with COMMIT sent.
		err = fmt.Errorf("commit: %w", err)
		if store.Transient(err) {
			err = &store.CommitUnknownError{Err: err} // sent and not answered: it may have landed
		}
		for _, j := range passed {
			j.finish(err)
		}
	}
}

// batchReads is what the first round trip reads for the checks.
type batchReads struct {
	convs     map[string]*convState
	instances map[string]error
	owners    map[string]sql.NullString
}

// reads are the first round trip's statements: BEGIN, the conversations'
// lock, then (after the lock, each in a statement of its own: READ
// COMMITTED, they see every takeover committed before the lock was
// granted) the fenced appends' instances and their turns' owners; and
// what they fill in once the round trip answered. Every instance and owner
// a check may ask for is read: one a statement finds no row for is filled
// in as such (an unknown instance; a turn without an owner).
func (b *appendBatcher) reads(live []*lockedJob) (*batchReads, []Piped) {
	r := &batchReads{convs: make(map[string]*convState, len(live)), instances: make(map[string]error), owners: make(map[string]sql.NullString)}
	var ids, instances, requests []string
	for _, j := range live {
		a := j.app
		if _, ok := r.convs[a.convID]; !ok {
			r.convs[a.convID] = &convState{}
			ids = append(ids, a.convID)
		}
		if a.instance == "" {
			continue
		}
		if _, ok := r.instances[a.instance]; !ok {
			r.instances[a.instance] = instanceRefused(a.instance, false, sql.NullFloat64{}, sql.NullFloat64{})
			instances = append(instances, a.instance)
		}
		if _, ok := r.owners[a.reqID]; !ok {
			r.owners[a.reqID] = sql.NullString{}
			requests = append(requests, a.reqID)
		}
	}
	stmts := []Piped{{Query: "BEGIN"}, {Query: b.q.Lock, Args: []any{ids}, Row: func(scan func(...any) error) error {
		var id string
		var active sql.NullString
		var next int64
		if err := scan(&id, &active, &next); err != nil {
			return fmt.Errorf("append frames: %w", err)
		}
		if st, ok := r.convs[id]; ok {
			*st = convState{found: true, active: active, next: next, first: next}
		}
		return nil
	}}}
	if len(instances) > 0 {
		stmts = append(stmts, Piped{Query: b.q.Instances, Args: []any{instances}, Row: func(scan func(...any) error) error {
			var id string
			var reaped, stopped sql.NullFloat64
			if err := scan(&id, &reaped, &stopped); err != nil {
				return fmt.Errorf("check fence: %w", err)
			}
			r.instances[id] = instanceRefused(id, true, reaped, stopped)
			return nil
		}})
	}
	if len(requests) > 0 {
		stmts = append(stmts, Piped{Query: b.q.Owners, Args: []any{requests}, Row: func(scan func(...any) error) error {
			var id string
			var owner sql.NullString
			if err := scan(&id, &owner); err != nil {
				return fmt.Errorf("append frames: %w", err)
			}
			r.owners[id] = owner
			return nil
		}})
	}
	return r, stmts
}

// rows are the Write statement's arguments: the frames of the appends that
// passed, and each conversation's next sequence.
func (b *appendBatcher) rows(passed []*lockedJob, convs map[string]*convState) []any {
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
	return []any{conv, seq, req, typ, payload, created, ids, next, updated}
}

// notified are the batch's frames per conversation, in the order the
// batch wrote them: what its notification carries.
func notified(passed []*lockedJob) (ids []string, frames [][]store.Frame) {
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
	return ids, frames
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
