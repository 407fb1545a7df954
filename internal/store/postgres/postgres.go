// Package postgres is StateDB on PostgreSQL (github.com/jackc/pgx/v5): the
// backend for several daemons sharing one database. Its queries are
// sqlstore's, shared with the SQLite backend, run through pgx's
// database/sql driver; this package supplies sqlstore's dialect, and the
// shared migration runner applies its schema. Every write runs in a READ
// COMMITTED transaction that locks the rows it reads before changing them
// (the conversation row first, then its turn or proposal), which is
// what makes sequence allocation and the active-request compare-and-set hold
// across processes. Appends are batched: a few writer loops each write the
// appends waiting (any conversations) in one such transaction, locking
// the conversations' rows in the order of their ids (sqlstore's
// lockedappends.go, with this dialect's AppendQueries on arrays), in one
// round trip when a guard statement finds the conversations as this
// process expects them (sqlstore's guarded.go). Commits
// that append frames NOTIFY the other processes,
// with the frames when they fit (notify.go); one dedicated listening
// connection per Store hands them to this process's streams.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations are this backend's embedded schema steps.
func Migrations() ([]store.Migration, error) { return store.LoadMigrations(migrationFS, "migrations") }

// channel is the NOTIFY channel of frame commits. The payload is
// "<store instance> <conversation id>": a Store wakes its own streams right
// after its commits and skips its own notifications, so within one process
// a signal closes exactly once per commit.
const channel = "studio_operator_frames"

// controlChannel is the NOTIFY channel of control keys
// (store.InstanceStore.ControlSignal): a cancel recorded for a turn or run,
// a turn claimed, work queued. The payload is "<store instance> <key>".
const controlChannel = "studio_operator_control"

// DefaultMaxConns bounds each Store's connection pool unless the URL sets
// pool_max_conns (as pgxpool's URLs do).
const DefaultMaxConns = 10

// migrateLock is the advisory lock key that serialises Migrate across
// daemons starting together ("studio" in ASCII).
const migrateLock = 0x73747564696f

// exclusiveLock is the advisory lock key of Exclusive ("studio-x" in
// ASCII): a different key from migrateLock, since Migrate takes its lock
// on a connection of its own.
const exclusiveLock = 0x73747564696f2d78

// Default session timeouts (Options). Every connection of the pool sets
// them, so no statement, row lock or open transaction of this daemon can
// hold the others up for long: a daemon paused inside a transaction (a
// GC pause, a frozen VM) loses the transaction, and its locks, after
// IdleInTransactionTimeout.
const (
	DefaultLockTimeout              = 2 * time.Second
	DefaultStatementTimeout         = 30 * time.Second
	DefaultIdleInTransactionTimeout = 5 * time.Second
	// DefaultTCPTimeout bounds how long a connection whose peer stopped
	// answering (a half-open connection, a server that froze) stays open:
	// keepalives probe an idle one, TCP_USER_TIMEOUT ends one whose data
	// goes unacknowledged, and a new connection must be made within it.
	DefaultTCPTimeout = 10 * time.Second
)

// Options tune a Store's connections; a zero field is its default.
type Options struct {
	// LockTimeout bounds a wait for a row lock (lock_timeout): a writer
	// that meets a lock a paused daemon holds fails with a transient error
	// and retries, instead of hanging.
	LockTimeout time.Duration
	// StatementTimeout bounds one statement (statement_timeout).
	StatementTimeout time.Duration
	// IdleInTransactionTimeout ends a session that sits in an open
	// transaction without a statement for this long
	// (idle_in_transaction_session_timeout), releasing its locks. Keep it
	// below the lease expiry, so a paused daemon's locks are gone before
	// the other daemons take its work over.
	IdleInTransactionTimeout time.Duration
	// TCPTimeout bounds how long a dead connection goes unnoticed (the
	// pool's and the listener's): keepalives after TCPTimeout/2 idle,
	// probing every TCPTimeout/10 (at least a second); TCP_USER_TIMEOUT
	// of TCPTimeout on unacknowledged data (Linux); and connect_timeout of
	// TCPTimeout unless the URL sets one. A connection that hangs without
	// its peer failing (a stuck proxy) is for the callers' deadlines.
	TCPTimeout time.Duration
	// plainNotify: commits notify the conversation only, not its frames
	// (as earlier releases do); for the benchmarks that compare the two.
	plainNotify bool
	// appendWriters: the writer loops of batched appends
	// (sqlstore.Config.AppendWriters); 0 is the default, negative leaves
	// each append its own transaction (for the benchmarks that compare).
	appendWriters int
}

func (o *Options) defaults() {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.IdleInTransactionTimeout <= 0 {
		o.IdleInTransactionTimeout = DefaultIdleInTransactionTimeout
	}
	if o.TCPTimeout <= 0 {
		o.TCPTimeout = DefaultTCPTimeout
	}
}

// dialer dials the database's connections with keepalives and a user
// timeout (Options.TCPTimeout).
func (o Options) dialer() *net.Dialer {
	return &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: o.TCPTimeout / 2, Interval: max(time.Second, o.TCPTimeout/10), Count: 3},
		Control:         userTimeout(o.TCPTimeout),
	}
}

func millis(d time.Duration) string { return strconv.FormatInt(max(1, d.Milliseconds()), 10) }

// ApplicationName is the application_name of the sessions of the daemon
// with process id pid, unless its URL names another.
func ApplicationName(pid int) string { return "studio " + strconv.Itoa(pid) }

// Store is StateDB on one PostgreSQL database.
type Store struct {
	*sqlstore.Store
	db       *sql.DB
	cfg      *pgx.ConnConfig
	instance string
	signals  store.Signals
	control  store.Signals
	log      *slog.Logger
	// framesSenders are the other instances seen on framesChannel: their
	// notifications on channel are redundant.
	framesSenders sync.Map
	// rounds counts the batched appends' round trips (dialect.Pipelined).
	rounds atomic.Int64

	cancel   context.CancelFunc
	listened chan struct{} // closed when the listener has stopped
	closing  sync.Once
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a libpq
// keyword/value string) and starts listening for other processes' frame
// commits. It does not migrate; call Migrate.
func Open(ctx context.Context, url string) (*Store, error) {
	return OpenWith(ctx, url, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, url string, opts Options) (*Store, error) {
	opts.defaults()
	// pgxpool's parser takes pool_max_conns out of the URL; the rest is
	// pgx's connection config.
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	cfg := pcfg.ConnConfig
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for k, v := range map[string]string{"lock_timeout": millis(opts.LockTimeout), "statement_timeout": millis(opts.StatementTimeout),
		"idle_in_transaction_session_timeout": millis(opts.IdleInTransactionTimeout)} {
		if _, set := cfg.RuntimeParams[k]; !set { // the URL's own setting wins
			cfg.RuntimeParams[k] = v
		}
	}
	if _, set := cfg.RuntimeParams["application_name"]; !set {
		// A daemon's sessions are found in pg_stat_activity by its pid.
		cfg.RuntimeParams["application_name"] = ApplicationName(os.Getpid())
	}
	cfg.DialFunc = opts.dialer().DialContext
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = opts.TCPTimeout
	}
	maxConns := DefaultMaxConns
	if strings.Contains(url, "pool_max_conns") {
		maxConns = int(pcfg.MaxConns)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s := &Store{db: db, cfg: cfg, instance: uuid.NewString(), log: slog.Default(), listened: make(chan struct{})}
	// Appends are batched (several per transaction and commit) by a few
	// writer loops, each holding one of the pool's connections while it
	// writes.
	writers := opts.appendWriters
	switch {
	case writers == 0:
		writers = min(sqlstore.DefaultAppendWriters, max(1, maxConns/2))
	case writers < 0:
		writers = 0
	}
	s.Store = sqlstore.New(sqlstore.Config{Writer: db, Reader: db, Dialect: dialect{instance: s.instance, plainNotify: opts.plainNotify, db: db, rounds: &s.rounds},
		Signals: &s.signals, Control: &s.control, AppendWriters: writers})
	// LISTEN before Open returns: no commit after it can be missed.
	conn, err := s.connectListener(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.listen(lctx, conn)
	return s, nil
}

// Migrate applies pending migrations and returns the schema version. An
// advisory lock makes daemons that start together migrate one at a time.
func (s *Store) Migrate(ctx context.Context, now time.Time) (int, error) {
	ms, err := Migrations()
	if err != nil {
		return 0, err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	if err := advisoryLock(ctx, conn, migrateLock); err != nil {
		return 0, fmt.Errorf("migrate: lock: %w", err)
	}
	defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(migrateLock)) //nolint:errcheck // the session ends with the connection anyway
	// sqlstore.Migrate creates this table with SQLite's REAL, which is a 4-byte
	// float here; create it first with the precision the other times have.
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at DOUBLE PRECISION NOT NULL)`); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	return sqlstore.Migrate(ctx, s.db, dialect{instance: s.instance}, ms, now)
}

// Exclusive runs fn while this process holds a database-wide advisory
// lock: daemons that start together seed a new database one at a time, so
// the second finds the first one's rows. The lock is the session's, so it
// is released when fn returns or when the connection drops.
func (s *Store) Exclusive(ctx context.Context, fn func(context.Context) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("exclusive: %w", err)
	}
	defer conn.Close()
	if err := advisoryLock(ctx, conn, exclusiveLock); err != nil {
		return fmt.Errorf("exclusive: lock: %w", err)
	}
	defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(exclusiveLock)) //nolint:errcheck // the session ends with the connection anyway
	return fn(ctx)
}

// advisoryLock takes a session advisory lock, waiting as long as ctx
// allows: the daemon that holds it migrates or seeds, which may take
// longer than lock_timeout. Tries without waiting, with a backoff.
func advisoryLock(ctx context.Context, conn *sql.Conn, key int64) error {
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		var ok bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Close stops the listener and closes the pool.
func (s *Store) Close() error {
	var err error
	s.closing.Do(func() {
		s.cancel()
		<-s.listened
		err = s.Store.Close()
	})
	return err
}

func (s *Store) connectListener(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.cfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	for _, ch := range []string{framesChannel, channel, controlChannel} {
		if _, err := conn.Exec(ctx, `LISTEN `+ch); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("listen: %w", err)
		}
	}
	return conn, nil
}

// listen fans the notifications of other processes' commits out to the
// waiting streams. When the connection drops it reconnects with a capped
// backoff and then wakes every stream, since notifications sent while it
// was away are lost: a woken stream re-reads its frames from the store.
func (s *Store) listen(ctx context.Context, conn *pgx.Conn) {
	defer close(s.listened)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err == nil {
			if n.Channel == framesChannel {
				s.onFrames(n.Payload)
				continue
			}
			instance, key, ok := strings.Cut(n.Payload, " ")
			_, carriesFrames := s.framesSenders.Load(instance)
			switch {
			case !ok || instance == s.instance:
			case n.Channel == controlChannel:
				s.control.Notify(key)
			case carriesFrames: // its framesChannel notification came first
			default:
				s.signals.Notify(key)
				s.Feed().Refresh(key)
			}
			continue
		}
		conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("postgres frame listener lost its connection; reconnecting", "err", err)
		for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if conn, err = s.connectListener(ctx); err == nil {
				break
			}
		}
		s.signals.NotifyAll()
		s.control.NotifyAll()
		s.Feed().RefreshAll()
	}
}

// dialect is PostgreSQL's part of sqlstore.
type dialect struct {
	instance    string        // this Store's, in its notifications
	plainNotify bool          // Options.plainNotify
	db          *sql.DB       // the pool, for Pipelined
	rounds      *atomic.Int64 // Store.rounds; nil: not counted
}

var _ sqlstore.Dialect = dialect{}

// Rebind numbers the ? placeholders: $1, $2, ...
func (dialect) Rebind(query string) string { return rebind(query) }

// Lock: writes lock the rows they check (see the package comment).
func (dialect) Lock(mode sqlstore.LockMode, of ...string) string {
	clause := " FOR UPDATE"
	switch mode {
	case sqlstore.ForKeyShare:
		clause = " FOR KEY SHARE"
	}
	if len(of) > 0 {
		clause += " OF " + strings.Join(of, ", ")
	}
	if mode == sqlstore.SkipLocked {
		clause += " SKIP LOCKED"
	}
	return clause
}

// MigrationPreamble lifts the session timeouts for a migration: a schema
// change waits for the other daemons' transactions on its tables, and may
// take long on a large database.
func (dialect) MigrationPreamble() string {
	return `SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = 0`
}

// Snapshot: several queries read one REPEATABLE READ snapshot.
func (dialect) Snapshot() *sql.TxOptions {
	return &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead}
}

// Notify tells the other processes' listeners (PostgreSQL delivers a
// notification only if its transaction commits).
func (d dialect) Notify(ctx context.Context, tx *sql.Tx, conversationID string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, d.instance+" "+conversationID)
	return err
}

// AppendQueries: the batched appends' statements, on arrays. The lock
// orders the conversations by their ids' bytes (COLLATE "C"), the same
// order in every daemon whatever the database's collation: two batches
// that share conversations wait for each other instead of deadlocking.
func (dialect) AppendQueries() sqlstore.AppendQueries {
	return sqlstore.AppendQueries{
		Lock: `SELECT id, active_request_id, next_sequence FROM studio_operator_conversations
			WHERE id = ANY($1::text[]) ORDER BY id COLLATE "C" FOR UPDATE`,
		Instances: `SELECT id, COALESCE(reaped_at, (SELECT r.reaped_at FROM studio_instance_reaps r WHERE r.instance_id = studio_instances.id)),
			stopped_at FROM studio_instances WHERE id = ANY($1::text[])`,
		Owners:       `SELECT request_id, owner_instance FROM studio_operator_turns WHERE request_id = ANY($1::text[])`,
		Write:        writeFrames(""),
		Guard:        appendGuard,
		GuardedWrite: writeFrames(" AND " + guardHeld),
	}
}

// writeFrames is AppendQueries' Write, with a condition on both of its
// writes.
func writeFrames(and string) string {
	return `WITH frames AS (
			INSERT INTO studio_operator_frames (conversation_id, sequence, request_id, frame_type, payload_json, created_at)
			SELECT c, s, r, t, CAST(p AS JSON), a FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::float8[]) AS f(c, s, r, t, p, a)
			WHERE true` + and + `)
		UPDATE studio_operator_conversations AS c SET next_sequence = v.n, updated_at = v.u
		FROM unnest($7::text[], $8::bigint[], $9::float8[]) AS v(id, n, u) WHERE c.id = v.id` + and
}

// guardSetting is where appendGuard records its answer: a setting local
// to the transaction.
const guardSetting = "studio.append_guard"

// guardHeld is true when the transaction's appendGuard held.
const guardHeld = `current_setting('` + guardSetting + `', true) = 'on'`

// appendGuard is AppendQueries' Guard: each count must be its list's
// length (the lists name each conversation, instance and turn once). An
// instance is live as the Instances query reads it: registered, neither
// reaped (its own column or its reap's) nor stopped.
const appendGuard = `SELECT set_config('` + guardSetting + `', CASE WHEN
		(SELECT count(*) FROM studio_operator_conversations c JOIN unnest($1::text[], $2::bigint[], $3::text[]) AS e(id, n, r) ON c.id = e.id
			WHERE c.next_sequence = e.n AND c.active_request_id = e.r) = cardinality($1::text[])
		AND (SELECT count(*) FROM studio_instances i WHERE i.id = ANY($4::text[]) AND i.reaped_at IS NULL AND i.stopped_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM studio_instance_reaps r WHERE r.instance_id = i.id)) = cardinality($4::text[])
		AND (SELECT count(*) FROM studio_operator_turns t JOIN unnest($5::text[], $6::text[]) AS o(r, i) ON t.request_id = o.r
			WHERE t.owner_instance = o.i) = cardinality($5::text[])
	THEN 'on' ELSE 'off' END, true) = 'on'`

// Pipelined runs fn on a connection of the pool, whose rounds send their
// statements in one round trip (pgx's batch: one network write, one Sync).
// A connection left in a transaction, or broken, is discarded.
func (d dialect) Pipelined(ctx context.Context, fn func(sqlstore.Round)) error {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ran := false
	err = c.Raw(func(driverConn any) error {
		sc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("pipelined: a connection of %T", driverConn)
		}
		pc := sc.Conn()
		ran = true
		fn(func(ctx context.Context, stmts ...sqlstore.Piped) (int, error) { return d.round(ctx, pc, stmts) })
		if pc.IsClosed() || pc.PgConn().TxStatus() != 'I' {
			return driver.ErrBadConn
		}
		return nil
	})
	if ran {
		return nil
	}
	return err
}

// round sends stmts in one round trip and reads their answers
// (sqlstore.Round).
func (d dialect) round(ctx context.Context, c *pgx.Conn, stmts []sqlstore.Piped) (failed int, err error) {
	if d.rounds != nil {
		d.rounds.Add(1)
	}
	b := &pgx.Batch{}
	for _, s := range stmts {
		b.Queue(s.Query, s.Args...)
	}
	br := c.SendBatch(ctx, b)
	// failedAt is the statement's index when the server refused it (it
	// then skips the rest), -1 when the connection failed.
	failedAt := func(i int, err error) (int, error) {
		br.Close() //nolint:errcheck // the error that matters is err
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return i, err
		}
		return -1, err
	}
	for i, s := range stmts {
		rows, err := br.Query()
		if err != nil {
			return failedAt(i, err)
		}
		for rows.Next() {
			if s.Row == nil {
				continue
			}
			if err := s.Row(rows.Scan); err != nil {
				rows.Close()
				return failedAt(-1, err) // the rest was sent: what ran is unknown
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return failedAt(i, err)
		}
	}
	if err := br.Close(); err != nil {
		return -1, err
	}
	return len(stmts), nil
}

// JSON: text is cast to json explicitly.
func (dialect) JSON(expr string) string { return "CAST(" + expr + " AS JSON)" }

// SearchMatch: full-text search over the search documents' tsvectors.
func (dialect) SearchMatch() string {
	return `SELECT conversation_id FROM studio_operator_search_docs WHERE tsv @@ to_tsquery('simple', ?)`
}

// SearchQuery: every term as a prefix, all required.
func (dialect) SearchQuery(terms []string) string {
	q := make([]string, len(terms))
	for i, t := range terms {
		q[i] = t + ":*"
	}
	return strings.Join(q, " & ")
}

// Control tells the other processes' listeners about a control key.
func (d dialect) Control(ctx context.Context, q sqlstore.Execer, key string) error {
	_, err := q.ExecContext(ctx, `SELECT pg_notify($1, $2)`, controlChannel, d.instance+" "+key)
	return err
}

// Retryable: a deadlock or serialization failure, and a unique violation:
// two writers inserted the same name or id at once, and the check that
// runs again sees the other's row and answers conflict.
func (dialect) Retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", "23505": // serialization_failure, deadlock_detected, unique_violation
		return true
	}
	return false
}

// rebind numbers the ? placeholders of query. A ? inside a quoted string
// or identifier stays as it is. A doubled quote inside one reads as leaving
// the quote and entering it again, which comes to the same; a backslash is
// not an escape (standard_conforming_strings), so the queries must not use
// E-strings.
func rebind(query string) string {
	if strings.IndexByte(query, '?') < 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
