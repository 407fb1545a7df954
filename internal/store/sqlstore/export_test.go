package sqlstore

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// Hooks of the group-commit writer loop for the tests of package
// sqlstore_test. Set them while the loop is idle (no write in flight): the
// next write's hand-over to the loop orders them before the loop reads them.

// SetGatherHook sets a function the loop runs when it has taken a batch's
// first transaction, before it takes the others waiting.
func SetGatherHook(s *Store, fn func()) { s.group.gather = fn }

// SetBeforeCommitHook sets a function the loop runs before COMMIT with the
// number of logical transactions that ran; an error fails the commit.
func SetBeforeCommitHook(s *Store, fn func(n int) error) { s.group.beforeCommit = fn }

// Waiting is the number of write transactions waiting for the loop.
func Waiting(s *Store) int { return s.group.b.waiting() }

// Txn runs fn as one write transaction of s.
func Txn(s *Store, ctx context.Context, fn func() error) error {
	return s.txn(ctx, func(*writeTx) error { return fn() })
}

// AppendThenFail runs one write transaction that appends p to the turn's
// conversation and then fails with cause: a logical transaction that wrote
// before it failed (AppendFrames refuses a bad frame before it writes).
func AppendThenFail(s *Store, ctx context.Context, convID, reqID string, now time.Time, p protocol.Payload, cause error) error {
	return s.txn(ctx, func(tx *writeTx) error {
		if _, err := appendFrames(ctx, tx, convID, reqID, now, p); err != nil {
			return err
		}
		return cause
	})
}

// SetAfterMergedHook sets a function the loop runs after the merged writes
// of a run of appends (n appends), before their savepoint is released; an
// error fails those writes as a failed statement would.
func SetAfterMergedHook(s *Store, fn func(n int) error) { s.group.afterMerged = fn }

// SetBeforePublishHook sets a function the loop runs after a commit, once
// its callers are answered and before its frames go to the streams.
func SetBeforePublishHook(s *Store, fn func()) { s.group.beforePublish = fn }
