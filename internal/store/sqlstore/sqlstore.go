// Package sqlstore is StateDB on database/sql: the one implementation of
// store.Store that the sqlite and postgres backends share. Every query is
// written here once, with ? placeholders. A backend opens its pools and
// supplies a Dialect for the few things its engine does its own way
// (placeholders, row locks, read snapshots, telling other processes about
// commits, retrying a transaction); what only one engine has (opening,
// pragmas, migrations, a notification listener, file maintenance) stays in
// the backend's package.
//
// The write path is the same for both engines: a write transaction reads
// the rows it checks and then changes them. SQLite runs every write on one
// connection, so nothing can change in between; PostgreSQL runs several at
// once, READ COMMITTED, so the reads lock their rows (Dialect.Lock). Where
// locking takes steps of its own (the conversation row before the turn or
// proposal, the order every writer keeps) the steps are taken only when the
// dialect locks rows at all.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Dialect is what an engine supplies to the shared Store.
type Dialect interface {
	// Rebind rewrites a query written with ? placeholders into the
	// engine's own (PostgreSQL's $1, $2, ...). It is called on every query.
	Rebind(query string) string
	// Lock is the clause that a SELECT in a write transaction appends to
	// lock the rows it reads until the transaction ends, in mode; of, when
	// given, limits the lock to those tables (aliases) of a join. It is ""
	// for an engine that serialises write transactions anyway (SQLite's
	// one writer connection): then the locking steps are skipped too.
	Lock(mode LockMode, of ...string) string
	// Snapshot is the options of a read-only transaction that gives reads
	// spanning several queries one consistent view.
	Snapshot() *sql.TxOptions
	// Notify runs inside a write transaction, before its commit, for each
	// conversation whose frames it changed: how an engine shared by
	// several processes tells the others (PostgreSQL's pg_notify). This
	// process's streams are woken after the commit, whatever Notify does.
	Notify(ctx context.Context, tx *sql.Tx, conversationID string) error
	// Control tells the other processes sharing the database about a
	// control key (store.ControlSignal): inside a write transaction before
	// its commit (q is the *sql.Tx), or at once (q is the *sql.DB). This
	// process's waiters are woken by the Store, whatever Control does.
	Control(ctx context.Context, q Execer, key string) error
	// Retryable reports an error of a write transaction that a fresh
	// transaction may not meet again (a deadlock, a serialization failure,
	// a unique violation by a concurrent insert): fn then runs again and
	// its checks see what the other writer committed.
	Retryable(err error) bool
	// SearchMatch is a subquery of the ids of conversations whose title or
	// turn text matches its one ? placeholder, which SearchQuery builds
	// from search terms (letters and digits only); each term matches the
	// words it begins.
	SearchMatch() string
	SearchQuery(terms []string) string
	// JSON is the expression expr, text holding JSON, as a value for a
	// JSON column.
	JSON(expr string) string
}

// Execer runs a statement: a *sql.Tx or a *sql.DB.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// LockMode is the strength of a row lock (Dialect.Lock).
type LockMode int

// Lock modes.
const (
	// ForUpdate: the transaction goes on to change the rows it read.
	ForUpdate LockMode = iota + 1
	// ForKeyShare: the rows must not be deleted before the transaction
	// ends (a row that a new reference names).
	ForKeyShare
	// SkipLocked: a claim, which locks for update and passes over the rows
	// another transaction holds instead of waiting for them.
	SkipLocked
)

// Config is what New needs.
type Config struct {
	// Writer runs every write transaction.
	Writer *sql.DB
	// Reader serves reads; it may be Writer.
	Reader *sql.DB
	// Dialect is the engine's.
	Dialect Dialect
	// Signals wakes this process's streams; nil gives the Store its own.
	// A backend passes one when something else wakes streams too (a
	// listener for other processes' commits).
	Signals *store.Signals
	// Control wakes this process's control waiters
	// (store.InstanceStore.ControlSignal); nil gives the Store its own. A
	// backend passes one when a listener for other processes' commits
	// wakes them too.
	Control *store.Signals
	// GroupCommit sends every write transaction through one writer loop
	// that commits all those waiting together: one commit, and so one
	// fsync, per batch (group.go). It suits an engine that runs writes one
	// at a time anyway (SQLite's one writer connection); an engine that
	// runs them concurrently (PostgreSQL) groups its commits itself.
	GroupCommit bool
	// MaxBatch bounds the logical transactions of one batch; 0 is
	// DefaultMaxBatch.
	MaxBatch int
	// AppendWriters, on an engine that locks rows and runs its writes
	// concurrently (PostgreSQL, a BatchAppender dialect), sends AppendFrames calls to that many
	// writer loops, each writing the appends waiting in one transaction
	// (lockedappends.go); 0 leaves each append its own transaction, -1 is
	// DefaultAppendWriters. Ignored with GroupCommit, which merges appends
	// itself.
	AppendWriters int
	// AfterCommit, when set, runs on the group-commit loop after each
	// commit of a batch: the backend's upkeep that follows the writes
	// (SQLite's checkpoints). It must return at once.
	AfterCommit func()
}

// Store is store.Store on database/sql.
type Store struct {
	writer, reader *sql.DB
	w, r           conn // the pools, with the dialect's placeholders
	d              Dialect
	locks          locks
	snapshot       *sql.TxOptions
	signals        *store.Signals
	control        *store.Signals
	group          *group         // nil: each write transaction commits alone
	afterCommit    func()         // Config.AfterCommit
	appends        *appendBatcher // nil: each append commits alone (or in group)
	feed           *feed.Feed
	obs            atomic.Pointer[observerBox] // Observe; nil: nobody
}

var _ store.Store = (*Store)(nil)

// New returns the Store on c's pools. It opens nothing and does not
// migrate; Close closes both pools.
func New(c Config) *Store {
	s := &Store{
		writer: c.Writer, reader: c.Reader, d: c.Dialect,
		w: conn{db: c.Writer, d: c.Dialect}, r: conn{db: c.Reader, d: c.Dialect},
		locks: locks{
			update:         c.Dialect.Lock(ForUpdate),
			updateSchedule: c.Dialect.Lock(ForUpdate, "s"),
			keyShare:       c.Dialect.Lock(ForKeyShare),
			skipLocked:     c.Dialect.Lock(SkipLocked),
		},
		snapshot: c.Dialect.Snapshot(),
		signals:  c.Signals,
		control:  c.Control,

		afterCommit: c.AfterCommit,
	}
	if s.signals == nil {
		s.signals = new(store.Signals)
	}
	if s.control == nil {
		s.control = new(store.Signals)
	}
	s.feed = feed.New(func(ctx context.Context, id string, after int64, limit int) ([]protocol.RawFrame, error) {
		frames, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: id, AfterSequence: after, Limit: limit})
		return store.Wire(frames), err
	})
	if c.GroupCommit {
		s.group = newGroup(s, c.MaxBatch)
	} else if d, ok := c.Dialect.(BatchAppender); ok && c.AppendWriters != 0 && s.locks.rows() {
		n := c.AppendWriters
		if n < 0 {
			n = DefaultAppendWriters
		}
		s.appends = newAppendBatcher(s, d, n, c.MaxBatch)
	}
	return s
}

// locks are the dialect's lock clauses, worked out once.
type locks struct {
	update         string
	updateSchedule string // a schedule read joins its playbook: lock the schedule only
	keyShare       string
	skipLocked     string
}

// rows reports whether the engine locks rows at all.
func (l *locks) rows() bool { return l.update != "" }

// querier is what a helper that reads needs: a pool (conn), a snapshot
// (readTx) or a write transaction (writeTx), all with ? placeholders.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// conn runs queries written with ? placeholders on a pool (db) or a
// transaction (tx). It holds the concrete types, not a querier: calls
// through an interface would move every query's arguments to the heap.
type conn struct {
	db *sql.DB
	tx *sql.Tx
	d  Dialect
	// batch is set in a transaction of the group-commit writer loop: its
	// statements run prepared, and under the batch's context rather than
	// the caller's (group.go).
	batch *batchConn
}

func (c conn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if c.batch != nil {
		if st := c.batch.stmt(c.tx, query); st != nil {
			return st.QueryRowContext(c.batch.ctx, args...)
		}
		ctx = c.batch.ctx
	}
	if c.tx != nil {
		return c.tx.QueryRowContext(ctx, c.d.Rebind(query), args...)
	}
	return c.db.QueryRowContext(ctx, c.d.Rebind(query), args...)
}

func (c conn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if c.batch != nil {
		if st := c.batch.stmt(c.tx, query); st != nil {
			return st.QueryContext(c.batch.ctx, args...)
		}
		ctx = c.batch.ctx
	}
	if c.tx != nil {
		return c.tx.QueryContext(ctx, c.d.Rebind(query), args...)
	}
	return c.db.QueryContext(ctx, c.d.Rebind(query), args...)
}

func (c conn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if c.batch != nil {
		if st := c.batch.stmt(c.tx, query); st != nil {
			return st.ExecContext(c.batch.ctx, args...)
		}
		ctx = c.batch.ctx
	}
	if c.tx != nil {
		return c.tx.ExecContext(ctx, c.d.Rebind(query), args...)
	}
	return c.db.ExecContext(ctx, c.d.Rebind(query), args...)
}

// SchemaVersion implements store.Store.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	defer s.timed("schema_version", time.Now())
	return CurrentVersion(ctx, s.reader)
}

// FrameSignal implements store.Store. A commit through this Store closes
// the channel when the commit returns; a backend whose database other
// processes write wakes it for their commits too (Config.Signals).
func (s *Store) FrameSignal(conversationID string) <-chan struct{} {
	return s.signals.Wait(conversationID)
}

// Subscribe implements store.Store.
func (s *Store) Subscribe(conversationID string) *feed.Subscription {
	return s.feed.Subscribe(conversationID)
}

// Feed is the store's feed: a backend whose database other processes
// write refreshes it on their commits.
func (s *Store) Feed() *feed.Feed { return s.feed }

// Close stops the writer loop, failing the transactions still waiting,
// and closes both pools (once, when they are one).
func (s *Store) Close() error {
	if s.group != nil {
		s.group.close()
	}
	if s.appends != nil {
		s.appends.close()
	}
	s.feed.Close()
	return errors.Join(s.reader.Close(), s.writer.Close())
}

func ts(t time.Time) float64 { return protocol.Timestamp(t) }

func fromTS(f float64) time.Time { return protocol.Time(f) }

func nullTS(f sql.NullFloat64) *time.Time {
	if !f.Valid {
		return nil
	}
	t := fromTS(f.Float64)
	return &t
}

func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	v := s.String
	return &v
}

// emptyNull stores "" as NULL.
func emptyNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func tsOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ts(*t)
}

// collect runs a query and scans every row; what names the operation in
// errors.
func collect[T any](ctx context.Context, c conn, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanString scans a one-column row of text, for collect.
func scanString(row scanner) (string, error) {
	var v string
	err := row.Scan(&v)
	return v, err
}

// scanner is a row to scan: *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func notFound(what, id string) error {
	return protocol.Errorf(protocol.NotFound, "%s %s not found", what, id)
}

// limitOr is n, or def when n is not positive.
func limitOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}
