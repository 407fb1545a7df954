package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/studio/operator/internal/store"
)

// writeTx is one attempt at a write transaction (in group commit: one
// logical transaction of a batch).
type writeTx struct {
	conn
	locks   *locks
	touched []string
	// controls are the control keys the commit notifies (store.ControlSignal).
	controls []string
	// appended are the frames the transaction appended, in order: after
	// the commit they go to this process's live streams.
	appended []store.Frame
	// removed are the conversations the transaction deleted (purges):
	// after the commit their live streams end.
	removed []string
	// changes are the application changes it makes (changes.go), logged
	// at its end.
	changes []appChange
	// audited are the admin_events rows it appended, in order (a fenced
	// execution records the first: fence.go).
	audited []int64
}

// touch records a conversation whose frames the transaction changes: its
// commit wakes the conversation's streams.
func (tx *writeTx) touch(conversationID string) {
	if !slices.Contains(tx.touched, conversationID) {
		tx.touched = append(tx.touched, conversationID)
	}
}

// control records a control key the commit notifies: a cancel, a claim,
// queued work.
func (tx *writeTx) control(key string) {
	if !slices.Contains(tx.controls, key) {
		tx.controls = append(tx.controls, key)
	}
}

// txn runs fn in one write transaction and, after commit, wakes this
// process's streams of the conversations fn touched. An error that the
// dialect calls retryable runs fn again on a fresh transaction, so the
// checks it makes see the row that a concurrent writer just committed.
func (s *Store) txn(ctx context.Context, fn func(tx *writeTx) error) error {
	return s.txnAppend(ctx, fn, nil)
}

// txnAppend is txn for a transaction that the group-commit loop may run
// merged with the other appends of its batch (app, when not nil:
// mergedappends.go); fn is how it runs otherwise.
func (s *Store) txnAppend(ctx context.Context, fn func(tx *writeTx) error, app *appendJob) error {
	if f, ok := store.FenceFrom(ctx); ok {
		inner := fn
		fn = func(tx *writeTx) error {
			if err := checkFence(ctx, tx, f); err != nil {
				return err
			}
			if err := inner(tx); err != nil {
				return err
			}
			if f.Execute {
				return markExecuted(ctx, tx, f)
			}
			return nil
		}
	}
	if app == nil {
		inner := fn
		fn = func(tx *writeTx) error {
			if err := inner(tx); err != nil {
				return err
			}
			store.BeforeCommit(ctx) // a test's pause point, its statements written
			return nil
		}
	}
	if s.group != nil {
		return s.group.submit(ctx, fn, app)
	}
	const attempts = 3
	var err error
	for range attempts {
		var tx *writeTx
		tx, err = s.txnOnce(ctx, fn)
		if err == nil {
			s.committed(tx)
			return nil
		}
		if !s.d.Retryable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// committed tells this process's streams of a commit: the frames it
// appended, and a wake-up for every conversation it touched; and this
// process's control waiters of the keys it notified.
func (s *Store) committed(tx *writeTx) {
	if s.appends != nil {
		s.appends.known.advance(tx.appended)
	}
	s.feed.Publish(store.Wire(tx.appended))
	for _, id := range tx.touched {
		s.signals.Notify(id)
	}
	for _, key := range tx.controls {
		s.control.Notify(key)
	}
	for _, id := range tx.removed {
		s.feed.Gone(id)
	}
}

// FrameNotifier is a Dialect that tells the other processes the frames a
// transaction appended, not only that it appended some: their streams
// then need no read of the store to see them. sqlstore calls it instead
// of Notify.
type FrameNotifier interface {
	// NotifyFrames is Notify with the frames the transaction appended to
	// the conversation, in order (none: it touched the conversation
	// without appending).
	NotifyFrames(ctx context.Context, tx *sql.Tx, conversationID string, frames []store.Frame) error
}

// notify tells the other processes about a conversation a transaction
// touched; appended are all the frames the transaction appended.
func (s *Store) notify(ctx context.Context, tx *sql.Tx, conversationID string, appended []store.Frame) error {
	fn, ok := s.d.(FrameNotifier)
	if !ok {
		return s.d.Notify(ctx, tx, conversationID)
	}
	var frames []store.Frame
	for _, f := range appended {
		if f.ConversationID == conversationID {
			frames = append(frames, f)
		}
	}
	return fn.NotifyFrames(ctx, tx, conversationID, frames)
}

func (s *Store) txnOnce(ctx context.Context, fn func(tx *writeTx) error) (*writeTx, error) {
	sqlTx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	tx := &writeTx{conn: conn{tx: sqlTx, d: s.d}, locks: &s.locks}
	if err := fn(tx); err != nil {
		_ = sqlTx.Rollback()
		return nil, err
	}
	if err := writeChanges(ctx, tx); err != nil {
		_ = sqlTx.Rollback()
		return nil, err
	}
	for _, id := range tx.touched {
		if err := s.notify(ctx, sqlTx, id, tx.appended); err != nil {
			_ = sqlTx.Rollback()
			return nil, fmt.Errorf("notify: %w", err)
		}
	}
	for _, key := range tx.controls {
		if err := s.d.Control(ctx, sqlTx, key); err != nil {
			_ = sqlTx.Rollback()
			return nil, fmt.Errorf("notify: %w", err)
		}
	}
	if err := sqlTx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) || !store.Transient(err) {
			return nil, fmt.Errorf("commit: %w", err)
		}
		// Sent and not answered: it may have landed.
		return nil, &store.CommitUnknownError{Err: fmt.Errorf("commit: %w", err)}
	}
	return tx, nil
}

// readTx is a read-only snapshot for reads that span several queries.
type readTx struct {
	conn
	tx *sql.Tx
}

func (t readTx) Rollback() error { return t.tx.Rollback() }

func (s *Store) readTx(ctx context.Context) (readTx, error) {
	tx, err := s.reader.BeginTx(ctx, s.snapshot)
	if err != nil {
		return readTx{}, err
	}
	return readTx{conn{tx: tx, d: s.d}, tx}, nil
}
