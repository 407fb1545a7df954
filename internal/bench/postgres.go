package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/studio/operator/internal/store/postgres"
)

// `studio bench --database postgres://…`: the appends runs go through the
// PostgreSQL store, the daemons run on that database, and PostgreSQL's own
// commit rate, measured in the same run, is the limit the appends are
// compared with (as the SQLite rows are with the write+fsync loop). The
// database is written to (conversations, frames, a probe table that is
// dropped again): give bench a throwaway one.

// isPostgresURL reports whether a bench store path is a PostgreSQL URL.
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// removeBenchStore removes a run's SQLite file; a PostgreSQL run's rows
// stay in its database.
func removeBenchStore(path string) {
	if !isPostgresURL(path) {
		_ = os.Remove(path)
	}
}

// redactURL is the URL without its password, for the report.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// ProbeConns is the concurrent connections of the commit probe: the store's
// pool (postgres.DefaultMaxConns), the most commits a daemon has in flight.
const ProbeConns = postgres.DefaultMaxConns

// postgresResult is PostgreSQL's own commit rate on the bench's database.
type postgresResult struct {
	URL string `json:"url"` // without its password
	// CommitsPerSec is one connection's loop of single-row INSERTs, each its
	// own transaction committed with synchronous_commit on: one WAL flush
	// per commit, the counterpart of the write+fsync loop.
	CommitsPerSec float64 `json:"commitsPerSec"`
	// PoolConns connections running the same loop at once: concurrent
	// commits share WAL flushes (group commit), the most a daemon's pool
	// can get from the server.
	PoolConns          int     `json:"poolConnections"`
	PoolCommitsPerSec  float64 `json:"poolCommitsPerSec"`
	CrossDaemonRunSpec string  `json:"crossDaemonRun,omitempty"`
}

// probeTable is where the commit probe inserts; dropped afterwards.
const probeTable = "studio_bench_commit_probe"

// commitRate is commits per second by conns connections, each looping
// over a single-row INSERT in its own transaction (autocommit) for d.
func commitRate(ctx context.Context, dbURL string, conns int, d time.Duration) (float64, error) {
	setup, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, fmt.Errorf("commit probe: %w", err)
	}
	defer setup.Close(context.Background())
	if _, err := setup.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+probeTable+` (id BIGSERIAL PRIMARY KEY, line TEXT NOT NULL)`); err != nil {
		return 0, fmt.Errorf("commit probe: %w", err)
	}
	defer setup.Exec(context.Background(), `DROP TABLE IF EXISTS `+probeTable) //nolint:errcheck // best effort: the table is the probe's alone
	cs := make([]*pgx.Conn, conns)
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	for i := range cs {
		if cs[i], err = pgx.Connect(ctx, dbURL); err != nil {
			return 0, fmt.Errorf("commit probe: %w", err)
		}
		// Durable commits whatever the server's default: the store's
		// commits are (a frame is on disk before a client sees it).
		if _, err := cs[i].Exec(ctx, `SET synchronous_commit = on`); err != nil {
			return 0, fmt.Errorf("commit probe: %w", err)
		}
	}
	const line = "a line of model output of ordinary length, streamed."
	var n atomic.Int64
	var failed atomic.Value
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if _, err := c.Exec(ctx, `INSERT INTO `+probeTable+` (line) VALUES ($1)`, line); err != nil {
					failed.Store(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return 0, fmt.Errorf("commit probe: %w", err)
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// probePostgres measures the database's commit rate, with one connection
// and with the pool's.
func probePostgres(ctx context.Context, dbURL string, d time.Duration, p progress) (*postgresResult, error) {
	res := &postgresResult{URL: redactURL(dbURL), PoolConns: ProbeConns}
	p.say("postgres: commit loop (single-row INSERT, synchronous_commit on), 1 connection, for %s", d)
	var err error
	if res.CommitsPerSec, err = commitRate(ctx, dbURL, 1, d); err != nil {
		return nil, err
	}
	p.say("postgres: %.0f commits/s", res.CommitsPerSec)
	p.say("postgres: the same loop on %d connections at once", ProbeConns)
	if res.PoolCommitsPerSec, err = commitRate(ctx, dbURL, ProbeConns, d); err != nil {
		return nil, err
	}
	p.say("postgres: %.0f commits/s", res.PoolCommitsPerSec)
	return res, nil
}

// crossDaemonLatency starts a second daemon on a's database and runs r
// (turn i of the script) with its turns on a and its streams on the second
// daemon: a frame committed by a reaches the streams through PostgreSQL's
// notification and the second daemon's read.
func crossDaemonLatency(ctx context.Context, a *benchDaemon, dir, scriptPath, dbURL string, i int, r benchLatency, t timing, p progress) (latencyRun, error) {
	b, err := startBenchDaemon(ctx, dir, filepath.Join(dir, "daemon-b"), scriptPath, 200*time.Microsecond, "--database", dbURL)
	if err != nil {
		return latencyRun{}, err
	}
	defer b.stop()
	p.say("cross-daemon: turns on pid %d, %d streams (%d per conversation) on pid %d, %.0f frames/s offered for %s",
		a.cmd.Process.Pid, r.convs*r.perConv, r.perConv, b.cmd.Process.Pid, r.offered(), t.length())
	reads0, _ := b.metric(ctx, "studio_operator_stream_store_reads_total")
	listeners, err := listeningSessions(ctx, dbURL)
	if err != nil {
		return latencyRun{}, err
	}
	lr, err := a.via(b).latency(ctx, i, r, t, p)
	if err != nil {
		return lr, err
	}
	lr.Listeners = listeners
	if reads1, err := b.metric(ctx, "studio_operator_stream_store_reads_total"); err == nil && lr.Frames > 0 {
		lr.StoreReadsPerF = (reads1 - reads0) / (float64(lr.Frames) / float64(r.perConv))
	}
	lr.Name = "cross-daemon " + lr.Name
	return lr, nil
}

// listeningSessions counts the sessions that listen on the database: a
// Store's listener sends its LISTENs and nothing after them.
func listeningSessions(ctx context.Context, dbURL string) (int, error) {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, fmt.Errorf("cross-daemon: %w", err)
	}
	defer c.Close(context.Background())
	var n int
	err = c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("cross-daemon: listening sessions: %w", err)
	}
	return n, nil
}

// via is a with its streams opened on b: turns go to a, frames are read
// from b.
func (a *benchDaemon) via(b *benchDaemon) *benchDaemon {
	return &benchDaemon{cmd: a.cmd, base: a.base, token: a.token, client: a.client, streamsOn: b}
}
