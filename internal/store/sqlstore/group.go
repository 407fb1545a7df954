package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"
)

// Group commit (Config.GroupCommit). Every write transaction of the store
// (an append, a turn's submission, start or end, a proposal, a ticket...)
// is a logical transaction handed to one writer loop. The loop takes the
// first that waits and every other waiting at that moment, runs each in
// its own SAVEPOINT on one physical transaction, and commits once: one
// fsync for the whole batch. A logical transaction that fails rolls back
// to its savepoint alone; the others go on. Every caller is answered only
// after the shared commit, and a failed commit fails every caller of the
// batch: none is told "committed" for a write that is not on disk.
//
// Nothing the store promises changes. The loop runs the logical
// transactions one after another, as the one writer connection ran them
// before, so each sees what the ones before it wrote; sequences, the
// compare-and-set on the active turn and the done frame in the
// transaction that releases the conversation hold as they did. Frames
// reach the streams only after the commit that makes them durable.
//
// A batch runs under its own context, not the callers': a statement
// interrupted by one caller's cancellation could take the whole physical
// transaction with it (SQLite rolls an interrupted write's transaction
// back). A caller that gives up before its turn is skipped; once its
// transaction ran, it waits for the commit, which is short.

// DefaultMaxBatch bounds the logical transactions of one batch. 1 000
// turns appending at once fit in one batch, one commit: at 512 they took
// two, and a third more CPU per append (BenchmarkGroupCommit).
const DefaultMaxBatch = 1024

// maxPrepared bounds the statements kept prepared: the write queries are
// a fixed set, but a few are built (IN lists) and must not grow it.
const maxPrepared = 256

// group is the writer loop of group commit.
type group struct {
	s *Store
	b *batcher[*job]

	// oldest is the enqueue time (Unix ns) of the first transaction of
	// the batch in flight, 0 between batches: transactions reach the loop
	// in order, so it is the oldest not yet answered (WriterOldestWait).
	oldest atomic.Int64

	// Owned by the loop.
	stmts   map[string]*sql.Stmt // prepared on the writer pool
	missing []string             // queries to prepare once the batch is done
	ran     []*job

	// Test hooks (export_test.go): gather runs when the loop has taken a
	// batch's first transaction, before it takes the others that wait;
	// beforeCommit runs before COMMIT, and its error fails the commit;
	// afterMerged runs after a run of appends' merged writes, and its
	// error fails them; beforePublish runs after a commit's callers are
	// answered, before its streams are told.
	gather        func()
	beforeCommit  func(n int) error
	afterMerged   func(n int) error
	beforePublish func()
}

// job is one logical transaction.
type job struct {
	answer
	fn func(tx *writeTx) error
	// app, when set, is an append the loop may merge with the others of
	// its batch (mergedappends.go); fn is still its ordinary transaction.
	app *appendJob
	// unmerged: its merged writes failed once; it runs the ordinary way.
	unmerged bool
	tx       writeTx
}

// run runs the logical transaction. A panic in it fails it alone, as an
// error: it must not take the writer loop, and every other caller's
// transaction, down with it.
func (j *job) run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("write transaction panicked: %v", r)
		}
	}()
	return j.fn(&j.tx)
}

func newGroup(s *Store, max int) *group {
	g := &group{s: s, stmts: make(map[string]*sql.Stmt)}
	// One yield while gathering, not one per caller that trickles in: the
	// streams a commit woke queue for the processor too, and each further
	// yield waited behind their socket writes while the batch's frames,
	// already gathered, waited for their commit (BenchmarkFanOutLatency).
	g.b = newBatcher(batcherParams[*job]{Max: max, Yields: 1, First: g.first, Run: g.runBatch})
	return g
}

// submit runs fn as one logical transaction and returns after the commit
// of its batch. app, when not nil, is the same transaction as an append
// the loop may merge with the other appends of its batch.
func (g *group) submit(ctx context.Context, fn func(tx *writeTx) error, app *appendJob) error {
	return g.b.submit(ctx, &job{fn: fn, app: app})
}

// close stops the loop after the batch it is running; transactions still
// waiting fail with errClosed.
func (g *group) close() {
	if !g.b.close() {
		return
	}
	for _, st := range g.stmts { // the loop is done with them
		st.Close()
	}
}

// first runs when the loop has taken a batch's first transaction.
func (g *group) first(j *job) {
	if g.gather != nil {
		g.gather()
	}
	g.oldest.Store(j.enqueued.UnixNano())
}

// runBatch runs a gathered batch, in as many physical transactions as
// breaks take (run), then prepares what it ran unprepared.
func (g *group) runBatch(batch []*job) {
	g.observe(batch)
	for len(batch) > 0 {
		batch = g.run(batch)
	}
	g.oldest.Store(0)
	g.prepare()
}

// observe reports the batch's size and each transaction's wait for the
// loop.
func (g *group) observe(batch []*job) {
	o := g.s.observer()
	if o == nil {
		return
	}
	o.WriterBatch(len(batch))
	now := time.Now()
	for _, j := range batch {
		o.WriterQueueWait(now.Sub(j.enqueued))
	}
}

// run runs the batch in one physical transaction and commits it. When the
// transaction itself breaks (an error its savepoint cannot undo), the
// logical transactions that ran in it fail and run returns those not yet
// run, for a fresh transaction; every call finishes at least one.
func (g *group) run(batch []*job) (rest []*job) {
	ctx := context.Background()
	sqlTx, err := g.s.writer.BeginTx(ctx, nil)
	if err != nil {
		err = fmt.Errorf("begin: %w", err)
		for _, j := range batch {
			j.finish(err)
		}
		return nil
	}
	bc := &batchConn{g: g, ctx: ctx, tx: make(map[string]*sql.Stmt)}
	g.ran = g.ran[:0]
	for i := 0; i < len(batch); {
		j := batch[i]
		if j.app == nil || j.unmerged {
			if err := g.runOne(sqlTx, bc, j); err != nil {
				return g.abort(sqlTx, batch[i+1:], err)
			}
			i++
			continue
		}
		// A run of appends: merged, in shared statements.
		k := i + 1
		for k < len(batch) && batch[k].app != nil && !batch[k].unmerged {
			k++
		}
		run := make([]*job, 0, k-i)
		for _, j := range batch[i:k] {
			if err := j.ctx.Err(); err != nil {
				j.finish(err)
				continue
			}
			run = append(run, j)
		}
		if retry, err := g.runAppends(sqlTx, bc, run); err != nil {
			// The merged writes failed, with no savepoint to undo them: the
			// transaction is rolled back, what ran in it before the run
			// fails (as at a failed commit), and the run and the rest of
			// the batch start over, the run unmerged.
			for _, j := range retry {
				j.unmerged = true
			}
			rest := append(retry, batch[k:]...)
			if len(g.ran) == 0 {
				_ = sqlTx.Rollback()
				return rest
			}
			return g.abort(sqlTx, rest, err)
		}
		i = k
	}
	for _, j := range g.ran {
		for _, id := range j.tx.touched {
			if err := g.s.notify(ctx, sqlTx, id, j.tx.appended); err != nil {
				return g.abort(sqlTx, nil, fmt.Errorf("notify: %w", err))
			}
		}
		for _, key := range j.tx.controls {
			if err := g.s.d.Control(ctx, sqlTx, key); err != nil {
				return g.abort(sqlTx, nil, fmt.Errorf("notify: %w", err))
			}
		}
	}
	if g.beforeCommit != nil {
		if err := g.beforeCommit(len(g.ran)); err != nil {
			return g.abort(sqlTx, nil, err)
		}
	}
	if err := sqlTx.Commit(); err != nil {
		err = fmt.Errorf("commit: %w", err)
		for _, j := range g.ran {
			j.finish(err)
		}
		return nil
	}
	if g.s.afterCommit != nil {
		g.s.afterCommit()
	}
	// The callers first, then the streams: both only after the commit.
	// Every goroutine woken here queues for the processor in the order
	// woken, and a batch of a hundred conversations wakes a thousand
	// streams, each with a socket write to do. Woken after them, the turns
	// waited for that whole fan-out before they could hand the writer
	// their next frames, and those frames waited for it again before
	// their commit (BenchmarkFanOutLatency). The streams are told in this
	// loop, before the next batch runs, so the feed still sees commits in
	// order.
	hook := g.beforePublish // read before the callers go on: they may set it
	for _, j := range g.ran {
		j.finish(nil)
	}
	if hook != nil {
		hook()
	}
	for _, j := range g.ran {
		g.s.committed(&j.tx)
	}
	return nil
}

// runOne runs one logical transaction in its own savepoint of the
// physical transaction and finishes it if it fails; it returns an error
// only when the physical transaction itself broke (the transaction was
// finished with it).
func (g *group) runOne(sqlTx *sql.Tx, bc *batchConn, j *job) error {
	if err := j.ctx.Err(); err != nil {
		j.finish(err)
		return nil
	}
	if err := bc.exec(sqlTx, `SAVEPOINT logical`); err != nil {
		j.finish(fmt.Errorf("savepoint: %w", err))
		return err
	}
	j.tx = writeTx{conn: conn{tx: sqlTx, d: g.s.d, batch: bc}, locks: &g.s.locks}
	err := j.run()
	if err == nil {
		err = writeChanges(bc.ctx, &j.tx)
	}
	if err != nil {
		j.finish(err)
		if rerr := bc.exec(sqlTx, `ROLLBACK TO logical`); rerr != nil {
			return rerr
		}
		if rerr := bc.exec(sqlTx, `RELEASE logical`); rerr != nil {
			return rerr
		}
		return nil
	}
	if err := bc.exec(sqlTx, `RELEASE logical`); err != nil {
		j.finish(fmt.Errorf("release savepoint: %w", err))
		return err
	}
	g.ran = append(g.ran, j)
	return nil
}

// abort rolls the physical transaction back and fails the logical
// transactions that ran in it: their writes are gone with it.
func (g *group) abort(sqlTx *sql.Tx, rest []*job, cause error) []*job {
	_ = sqlTx.Rollback()
	err := fmt.Errorf("group commit: the batch's transaction failed, nothing of it was committed: %w", cause)
	for _, j := range g.ran {
		j.finish(err)
	}
	g.ran = g.ran[:0]
	return rest
}

// prepare prepares the statements the last batch ran unprepared, now that
// the writer connection is free. database/sql keeps each on the writer's
// one connection, where the next batches find it (Tx.StmtContext).
func (g *group) prepare() {
	for _, q := range g.missing {
		if _, ok := g.stmts[q]; ok || len(g.stmts) >= maxPrepared {
			continue
		}
		st, err := g.s.writer.PrepareContext(context.Background(), g.s.d.Rebind(q))
		if err != nil {
			continue // it runs unprepared, and fails there if it must
		}
		g.stmts[q] = st
	}
	g.missing = g.missing[:0]
}

// batchConn is what a transaction of the writer loop runs its statements
// with: prepared statements, and the batch's context.
type batchConn struct {
	g   *group
	ctx context.Context
	tx  map[string]*sql.Stmt // the statements as bound to this transaction
}

// stmt is query as a statement of tx: the prepared one, or one prepared in
// tx for this use (and noted, to be prepared for good after the batch).
// Nil when it does not prepare: the caller runs it plainly, which reports
// the error.
func (b *batchConn) stmt(tx *sql.Tx, query string) *sql.Stmt {
	if st, ok := b.tx[query]; ok {
		return st
	}
	if st, ok := b.g.stmts[query]; ok {
		st = tx.StmtContext(b.ctx, st)
		b.tx[query] = st
		return st
	}
	if len(b.g.stmts) < maxPrepared {
		b.g.missing = append(b.g.missing, query)
	}
	st, err := tx.PrepareContext(b.ctx, b.g.s.d.Rebind(query))
	if err != nil {
		return nil
	}
	return st
}

// exec runs one of the loop's own statements (the savepoints around each
// logical transaction) prepared, as the transactions' statements are:
// parsing them twice per logical transaction was a few per cent of the
// loop.
func (b *batchConn) exec(tx *sql.Tx, query string) error {
	if st := b.stmt(tx, query); st != nil {
		_, err := st.ExecContext(b.ctx)
		return err
	}
	_, err := tx.ExecContext(b.ctx, b.g.s.d.Rebind(query))
	return err
}
