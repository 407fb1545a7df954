package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/openapi/openapitest"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/postgres/pgtest"
)

// The fault tests' harness: three daemons of the built binary on one
// PostgreSQL database, as in cluster_process_test.go, with the faults
// production brings injected — a daemon paused (SIGSTOP, as a GC pause
// or a VM freeze does) and continued, killed (SIGKILL) and started
// again, the database restarted or stopped for a while. The database is
// the truth the tests check: turns, frames, runs and the audit trail, and
// the order in which their transactions committed (pgtest servers keep
// commit timestamps).

// faultFlags are the database flags of the fault tests' daemons: how long
// writes retry through a database outage before a turn fails, and the
// server-side timeouts that keep a paused daemon's transaction from
// blocking the others.
var faultFlags = []string{
	"--db-outage-budget", "60s",
	"--db-lock-timeout", "1s",
	"--db-statement-timeout", "30s",
	"--db-idle-tx-timeout", "1s",
}

// leaseExpiry is the expiry of clusterLease, the fault tests' default.
const leaseExpiry = 2 * time.Second

// skipLong skips a long fault test under -short.
func skipLong(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a fault test of several seconds to minutes; skipped with -short")
	}
}

// faultSeed is the seed of a test's random choices: STUDIO_CHAOS_SEED to
// replay a run, else a new one; it is logged either way.
func faultSeed(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STUDIO_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STUDIO_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (STUDIO_CHAOS_SEED=%d replays these choices)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

// faultScript is the scripted model of the fault tests. Matches are
// unusual words, so that a playbook run's prompt (which the same model
// executes) only ever matches the last, quick turn:
//   - "zqslow": a turn that runs ten minutes, until something ends it;
//   - "zqpaced": "started", then tokens text frames paced pace apart;
//   - "zqlaunch-NNNN" (NNNN < launches, four digits): a launch_playbook
//     proposal whose run has the input "zqrun-NNNN", so each proposal's
//     runs can be counted;
//   - anything else: "ok" at once.
func faultScript(t testing.TB, launches, tokens int, pace time.Duration) string {
	t.Helper()
	var turns []string
	turns = append(turns, `{"match":"zqslow","steps":[{"text":"thinking "},{"sleepMs":600000},{"text":"never"}]}`)
	paced := []string{`{"text":"started "}`}
	for i := range tokens {
		paced = append(paced, fmt.Sprintf(`{"sleepMs":%d},{"text":"tok%d "}`, pace.Milliseconds(), i))
	}
	turns = append(turns, `{"match":"zqpaced","steps":[`+strings.Join(paced, ",")+`]}`)
	for i := range launches {
		turns = append(turns, fmt.Sprintf(`{"match":"%s","steps":[`+
			`{"tool":"launch_playbook","arguments":{"playbook":"summarize-failed-runs","input":"%s"}},{"text":"launched"}]}`,
			launchWord(i), runInput(i)))
	}
	turns = append(turns, `{"steps":[{"text":"ok"}]}`)
	return writeScript(t, `{"turns":[`+strings.Join(turns, ",\n")+`]}`)
}

func launchWord(i int) string { return fmt.Sprintf("zqlaunch-%04d", i) }
func runInput(i int) string   { return fmt.Sprintf("zqrun-%04d", i) }

// faultCluster is daemons in slots on one database, which the test may
// pause, kill and start again, and the database's server, which it may
// restart when it is the test's own. A proxied cluster's daemons reach
// the database each through a proxy of its slot (tcpProxy), which the
// test may stop: the daemon's connections then hang.
type faultCluster struct {
	t       *testing.T
	srv     *pgtest.Server
	url     string
	dir     string
	args    []string // after the database flag
	proxies []*tcpProxy
	pool    *pgxpool.Pool // the test's connections, for checks; they outlive database restarts

	mu sync.Mutex
	ds []*daemon
}

// newFaultCluster starts n daemons at once on a new database of srv
// (private: the server is the test's own, so the database is "studio"),
// with args after the database flag.
func newFaultCluster(t *testing.T, srv *pgtest.Server, private bool, n int, args ...string) *faultCluster {
	t.Helper()
	return startFaultCluster(t, srv, private, false, n, args...)
}

// newProxiedCluster is newFaultCluster whose daemons reach the database
// each through its slot's proxy.
func newProxiedCluster(t *testing.T, srv *pgtest.Server, private bool, n int, args ...string) *faultCluster {
	t.Helper()
	return startFaultCluster(t, srv, private, true, n, args...)
}

func startFaultCluster(t *testing.T, srv *pgtest.Server, private, proxied bool, n int, args ...string) *faultCluster {
	t.Helper()
	c := &faultCluster{t: t, srv: srv, dir: t.TempDir(), args: args}
	if private {
		srv.Exec(t, `CREATE DATABASE studio`)
		c.url = srv.URL("studio")
	} else {
		c.url = srv.NewDatabase(t, "")
	}
	if proxied {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			c.proxies = append(c.proxies, newTCPProxy(t, u.Host))
		}
	}
	for i := range n {
		c.ds = append(c.ds, spawnDaemon(t, c.dir, c.argsFor(i)...))
	}
	for _, d := range c.ds {
		if err := readyErr(t, d); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pgxpool.New(context.Background(), c.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c.pool = pool
	return c
}

// readyErr is ready that answers an error instead of failing the test,
// for goroutines that start daemons again.
func readyErr(tb testing.TB, d *daemon) error {
	select {
	case d.URL = <-d.addr:
	case <-d.exited:
		return fmt.Errorf("daemon exited at start:\n%s", d.Logs())
	case <-time.After(90 * time.Second):
		return fmt.Errorf("daemon did not start:\n%s", d.Logs())
	}
	token, err := os.ReadFile(filepath.Join(d.dir, "token"))
	if err != nil {
		return err
	}
	d.client = apiclient.New(d.URL, strings.TrimSpace(string(token)), &http.Client{Transport: openapitest.New(tb).Transport(nil)})
	return nil
}

// argsFor are the daemon flags of slot i: its database URL (through its
// proxy, in a proxied cluster) and the cluster's.
func (c *faultCluster) argsFor(i int) []string {
	db := c.url
	if c.proxies != nil {
		u, _ := url.Parse(c.url)
		u.Host = c.proxies[i].addr()
		db = u.String()
	}
	return append([]string{"--database", db}, c.args...)
}

// d is the daemon in slot i.
func (c *faultCluster) d(i int) *daemon {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ds[i]
}

// daemons is every slot's daemon.
func (c *faultCluster) daemons() []*daemon {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*daemon(nil), c.ds...)
}

// restart kills slot i's daemon if it still runs and starts a new one
// there on the same database and data directory.
func (c *faultCluster) restart(i int) (*daemon, error) {
	old := c.d(i)
	old.kill()
	<-old.exited
	d := spawnDaemon(c.t, c.dir, c.argsFor(i)...)
	if err := readyErr(c.t, d); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.ds[i] = d
	c.mu.Unlock()
	return d, nil
}

func (d *daemon) pause()  { _ = d.cmd.Process.Signal(syscall.SIGSTOP) }
func (d *daemon) resume() { _ = d.cmd.Process.Signal(syscall.SIGCONT) }

// running says whether the daemon's process has not exited.
func (d *daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// poll calls cond every 20 ms until it says done, ctx ends (an error
// naming what and cond's last error) or cond fails for good. Errors of
// cond are retried: the database may be restarting.
func poll(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) error {
	var last error
	for {
		done, err := cond(ctx)
		if err == nil && done {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitUntil is poll that fails the test.
func (c *faultCluster) waitUntil(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) {
	c.t.Helper()
	if err := poll(ctx, what, cond); err != nil {
		c.t.Fatal(err)
	}
}

// instanceOf is the live instance a daemon registered last (a daemon that
// lost its lease rejoins as a new instance), found by its process id.
func (c *faultCluster) instanceOf(ctx context.Context, d *daemon) (string, error) {
	var id string
	err := c.pool.QueryRow(ctx, `SELECT id FROM studio_instances WHERE pid = $1 AND reaped_at IS NULL AND stopped_at IS NULL
		ORDER BY started_at DESC LIMIT 1`, d.cmd.Process.Pid).Scan(&id)
	return id, err
}

// reaped says whether an instance was reaped (its reaping recorded; the
// instance's own row may follow later, when a frozen session of it frees
// the row).
func (c *faultCluster) reaped(ctx context.Context, instance string) (bool, error) {
	var r bool
	err := c.pool.QueryRow(ctx, `SELECT reaped_at IS NOT NULL OR EXISTS (SELECT 1 FROM studio_instance_reaps WHERE instance_id = id)
		FROM studio_instances WHERE id = $1`, instance).Scan(&r)
	return r, err
}

// startTurn submits instruction as the first turn of a new conversation.
func startTurn(ctx context.Context, d *daemon, instruction string) (convID, requestID string, err error) {
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		return "", "", fmt.Errorf("create a conversation on %s: %w", d.URL, err)
	}
	zero := int64(0)
	acc, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: instruction,
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero})
	if err != nil {
		return conv.ID, "", fmt.Errorf("submit %q on %s: %w", instruction, d.URL, err)
	}
	return conv.ID, acc.RequestID, nil
}

// mustStartTurn is startTurnAgain that fails the test.
func (c *faultCluster) mustStartTurn(ctx context.Context, d *daemon, instruction string) (convID, requestID string) {
	c.t.Helper()
	convID, requestID, err := c.startTurnAgain(ctx, d, instruction)
	if err != nil {
		c.t.Fatal(err)
	}
	return convID, requestID
}

// startTurnAgain is startTurn that tries again, as a client does, when
// the answer says to (a read past its deadline on a loaded machine:
// "credentials could not be checked"); safe from any goroutine.
func (c *faultCluster) startTurnAgain(ctx context.Context, d *daemon, instruction string) (convID, requestID string, err error) {
	for {
		convID, requestID, err = startTurn(ctx, d, instruction)
		var pe *protocol.Error
		if err == nil || !errors.As(err, &pe) || !pe.Retryable || ctx.Err() != nil {
			return convID, requestID, err
		}
		c.t.Logf("start a turn: %v; again", err)
		select { // a client's pause before it tries again
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// parked is a pending proposal whose turn waits for a human.
type parked struct {
	conv, request, id, hash string
}

// parkedProposal reads the pending proposal of a turn once it is parked
// on it.
func (c *faultCluster) parkedProposal(ctx context.Context, convID, requestID string) (parked, error) {
	p := parked{conv: convID, request: requestID}
	err := poll(ctx, "the turn parked on its proposal "+requestID, func(ctx context.Context) (bool, error) {
		var status string
		if err := c.pool.QueryRow(ctx, `SELECT status FROM studio_operator_turns WHERE request_id = $1`, requestID).Scan(&status); err != nil {
			return false, err
		}
		if status != "awaiting_confirmation" {
			return false, nil
		}
		err := c.pool.QueryRow(ctx, `SELECT id, command_hash FROM studio_operator_proposals WHERE request_id = $1 AND status = 'pending'`,
			requestID).Scan(&p.id, &p.hash)
		return err == nil, err
	})
	return p, err
}

// confirm confirms a parked proposal on d.
func confirm(ctx context.Context, d *daemon, p parked) (protocol.ProposalResult, error) {
	return d.client.Confirm(ctx, p.conv, p.id, protocol.ConfirmProposalRequest{ExpectedCommandHash: p.hash})
}

// countStarted counts the turns among ids whose model said "started".
func (c *faultCluster) countStarted(ctx context.Context, ids []string) (int, error) {
	var n int
	err := c.pool.QueryRow(ctx, `SELECT COUNT(DISTINCT request_id) FROM studio_operator_frames
		WHERE request_id = ANY($1) AND frame_type = 'text' AND btrim(payload_json->>'content') = 'started'`, ids).Scan(&n)
	return n, err
}

// turnEnd is how a turn ended, from the database.
type turnEnd struct {
	status   string
	code     string // error_code of a failed turn
	dones    int    // done frames
	outcomes string // their outcomes, comma-separated
}

// turnEnds reads the status and done frames of turns (every turn of the
// database when ids is nil).
func (c *faultCluster) turnEnds(ctx context.Context, ids []string) (map[string]turnEnd, error) {
	rows, err := c.pool.Query(ctx, `SELECT t.request_id, t.status, COALESCE(t.error_code, ''), COUNT(f.sequence), COALESCE(string_agg(f.payload_json->>'outcome', ','), '')
		FROM studio_operator_turns t
		LEFT JOIN studio_operator_frames f ON f.request_id = t.request_id AND f.frame_type = 'done'
		WHERE $1::text[] IS NULL OR t.request_id = ANY($1)
		GROUP BY t.request_id, t.status, t.error_code`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]turnEnd{}
	for rows.Next() {
		var id string
		var e turnEnd
		if err := rows.Scan(&id, &e.status, &e.code, &e.dones, &e.outcomes); err != nil {
			return nil, err
		}
		out[id] = e
	}
	return out, rows.Err()
}

func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// waitTurnsEnded waits until every turn of ids (every turn of the
// database when nil) is terminal with a done frame, then says which are
// not exactly one done each; it returns the ends.
func (c *faultCluster) waitTurnsEnded(ctx context.Context, ids []string) map[string]turnEnd {
	c.t.Helper()
	var ends map[string]turnEnd
	err := poll(ctx, "every turn ended", func(ctx context.Context) (bool, error) {
		got, err := c.turnEnds(ctx, ids)
		if err != nil {
			return false, err
		}
		ends = got
		if ids != nil && len(ends) != len(ids) {
			return false, fmt.Errorf("%d of %d turns in the database", len(ends), len(ids))
		}
		for _, e := range ends {
			if !terminal(e.status) || e.dones == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		stuck := map[string]int{}
		var example string
		for id, e := range ends {
			if !terminal(e.status) || e.dones == 0 {
				stuck[fmt.Sprintf("%s with %d done", e.status, e.dones)]++
				example = id
			}
		}
		c.t.Fatalf("%v; turns not ended: %v, e.g. %s\n%s", err, stuck, c.describeTurn(example), c.logTails())
	}
	for id, e := range ends {
		if e.dones != 1 {
			c.t.Errorf("turn %s ended %s with %d done frames (%s), want exactly one", id, e.status, e.dones, e.outcomes)
		}
	}
	return ends
}

// describeTurn says who owns a turn and in which state that instance is.
func (c *faultCluster) describeTurn(requestID string) string {
	if requestID == "" {
		return "none"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var status, owner, state string
	err := c.pool.QueryRow(ctx, `SELECT t.status, COALESCE(t.owner_instance, ''),
		COALESCE((SELECT CASE WHEN i.reaped_at IS NOT NULL THEN 'reaped' WHEN i.stopped_at IS NOT NULL THEN 'stopped' ELSE 'live, pid ' || i.pid END
			FROM studio_instances i WHERE i.id = t.owner_instance), '')
		FROM studio_operator_turns t WHERE t.request_id = $1`, requestID).Scan(&status, &owner, &state)
	if err != nil {
		return fmt.Sprintf("turn %s: %v", requestID, err)
	}
	return fmt.Sprintf("turn %s is %s, owned by instance %q (%s)", requestID, status, owner, state)
}

// outcomeCounts counts turn ends by status (and error code).
func outcomeCounts(ends map[string]turnEnd) map[string]int {
	out := map[string]int{}
	for _, e := range ends {
		k := e.status
		if e.code != "" {
			k += "/" + e.code
		}
		out[k]++
	}
	return out
}

// logTails is the end of every daemon's log, for a failure message.
func (c *faultCluster) logTails() string {
	var b strings.Builder
	for i, d := range c.daemons() {
		logs := d.Logs()
		if len(logs) > 4000 {
			logs = "…" + logs[len(logs)-4000:]
		}
		fmt.Fprintf(&b, "--- daemon %d (pid %d, running %v):\n%s\n", i, d.cmd.Process.Pid, d.running(), logs)
	}
	return b.String()
}

// launchReport is what the database says about the launch_playbook
// proposals and the runs they created.
type launchReport struct {
	proposals  int
	byStatus   map[string]int // proposals by status
	decisions  map[string]int // their audit rows by decision
	runs       int            // runs created by confirmed proposals
	violations []string
}

// checkLaunches checks every launch_playbook proposal of the database
// (each launches a run with its own input, see faultScript) against the
// runs and the audit trail:
//   - the command ran at most once: at most one run with its input;
//   - never after the cluster declared it would not: each run's
//     transaction (the run row commits with its studio.app.command audit
//     row, which is never updated, so that row's commit timestamp is the
//     run's) committed before the proposal's indeterminate audit row's,
//     and no executed or failed decision committed after that row either
//     (a stale executor's write);
//   - every execution is audited: each run has its studio.app.command
//     row and its proposal an executed or indeterminate decision;
//   - no run that no proposal accounts for.
func (c *faultCluster) checkLaunches(ctx context.Context) (launchReport, error) {
	rep := launchReport{byStatus: map[string]int{}, decisions: map[string]int{}}
	type proposal struct {
		id, status string
	}
	byInput := map[string][]proposal{}
	rows, err := c.pool.Query(ctx, `SELECT id, status, command_json->>'input' FROM studio_operator_proposals WHERE command_type = 'launch_playbook'`)
	if err != nil {
		return rep, err
	}
	for rows.Next() {
		var p proposal
		var input string
		if err := rows.Scan(&p.id, &p.status, &input); err != nil {
			rows.Close()
			return rep, err
		}
		byInput[input] = append(byInput[input], p)
		rep.proposals++
		rep.byStatus[p.status]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rep, err
	}
	type run struct {
		id        string
		created   float64
		committed *time.Time // of its studio.app.command audit row; nil: no row
	}
	runsByInput := map[string][]run{}
	rows, err = c.pool.Query(ctx, `SELECT r.id, r.input, r.created_at,
		(SELECT MIN(pg_xact_commit_timestamp(e.xmin)) FROM admin_events e WHERE e.action = 'studio.app.command' AND e.details::jsonb->'run_ids' ? r.id)
		FROM studio_runs r WHERE r.run_trigger = 'operator'`)
	if err != nil {
		return rep, err
	}
	for rows.Next() {
		var r run
		var input string
		if err := rows.Scan(&r.id, &input, &r.created, &r.committed); err != nil {
			rows.Close()
			return rep, err
		}
		runsByInput[input] = append(runsByInput[input], r)
		rep.runs++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rep, err
	}
	for input, runs := range runsByInput {
		if len(byInput[input]) == 0 {
			rep.violations = append(rep.violations, fmt.Sprintf("%d runs with input %s, which no proposal launches", len(runs), input))
		}
	}
	for input, ps := range byInput {
		runs := runsByInput[input]
		for _, r := range runs {
			if r.committed == nil {
				rep.violations = append(rep.violations, fmt.Sprintf("run %s (input %s) has no studio.app.command audit row", r.id, input))
			}
		}
		type audit struct {
			decision  string
			committed time.Time
			created   float64
		}
		var audits []audit
		for _, p := range ps {
			rows, err := c.pool.Query(ctx, `SELECT details::jsonb->>'decision', pg_xact_commit_timestamp(xmin), created_at FROM admin_events
				WHERE target_id = $1 AND action = 'studio.operator.command' ORDER BY id`, p.id)
			if err != nil {
				return rep, err
			}
			for rows.Next() {
				var a audit
				if err := rows.Scan(&a.decision, &a.committed, &a.created); err != nil {
					rows.Close()
					return rep, err
				}
				audits = append(audits, a)
				rep.decisions[a.decision]++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return rep, err
			}
		}
		confirmed, executed := 0, false
		var indeterminate *audit
		for i, a := range audits {
			switch a.decision {
			case "confirmed":
				confirmed++
			case "executed":
				executed = true
			case "indeterminate":
				if indeterminate == nil {
					indeterminate = &audits[i]
				}
			}
		}
		if len(runs) > max(confirmed, 1) || len(runs) > len(ps) {
			rep.violations = append(rep.violations, fmt.Sprintf("input %s: %d runs for %d proposals (%d confirmed): the command ran more than once",
				input, len(runs), len(ps), confirmed))
		}
		if len(runs) > 0 && !executed && indeterminate == nil {
			rep.violations = append(rep.violations, fmt.Sprintf("input %s: a run was created but its proposal has no executed or indeterminate audit row (decisions %v)",
				input, decisionsOf(audits, func(a audit) string { return a.decision })))
		}
		if indeterminate == nil || len(ps) != 1 {
			continue // with two proposals of one input (a model call replayed) which run is whose is unknown
		}
		for _, r := range runs {
			if r.committed != nil && !r.committed.Before(indeterminate.committed) {
				rep.violations = append(rep.violations, fmt.Sprintf("proposal %s: its run %s committed at %s, %s after the indeterminate audit row (created_at %.3f vs %.3f)",
					ps[0].id, r.id, r.committed.Format(time.RFC3339Nano), r.committed.Sub(indeterminate.committed), r.created, indeterminate.created))
			}
		}
		for _, a := range audits {
			if (a.decision == "executed" || a.decision == "failed") && a.committed.After(indeterminate.committed) {
				rep.violations = append(rep.violations, fmt.Sprintf("proposal %s: an %s audit row committed %s after its indeterminate row: a stale executor wrote",
					ps[0].id, a.decision, a.committed.Sub(indeterminate.committed)))
			}
		}
	}
	return rep, nil
}

func decisionsOf[T any](xs []T, f func(T) string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

// dbPorts are the local TCP ports of a process's connections to the
// database server: the client_port of its sessions in pg_stat_activity.
// It reads /proc (Linux), as the process's sockets are not otherwise
// visible to the test.
func (c *faultCluster) dbPorts(pid int) ([]int, error) {
	u, err := url.Parse(c.url)
	if err != nil {
		return nil, err
	}
	serverPort, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	table, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil, err
	}
	var ports []int
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		_, local, _ := strings.Cut(f[1], ":")
		_, remote, _ := strings.Cut(f[2], ":")
		lp, err1 := strconv.ParseInt(local, 16, 32)
		rp, err2 := strconv.ParseInt(remote, 16, 32)
		if err1 == nil && err2 == nil && int(rp) == serverPort {
			ports = append(ports, int(lp))
		}
	}
	return ports, nil
}

// inTransaction counts the sessions on ports that are inside a
// transaction whose last statement matches pattern (a regular expression).
func (c *faultCluster) inTransaction(ctx context.Context, ports []int, pattern string) (int, error) {
	var n int
	err := c.pool.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity
		WHERE client_port = ANY($1) AND xact_start IS NOT NULL AND query ~* $2`, ports, pattern).Scan(&n)
	return n, err
}

// pauseInside pauses d (SIGSTOP) while one of its sessions is inside a
// transaction whose statement matches pattern: it watches the daemon's
// sessions and stops the process the moment one is seen in such a
// transaction; when the transaction ended before the signal landed, it
// continues the process (a pause of a millisecond) and watches again. It
// gives up after within, leaving d running, and says whether it caught
// (and paused) d inside.
func (c *faultCluster) pauseInside(ctx context.Context, d *daemon, pattern string, within time.Duration) (bool, error) {
	deadline := time.Now().Add(within)
	ports, err := c.dbPorts(d.cmd.Process.Pid)
	if err != nil {
		return false, err
	}
	refreshed := time.Now()
	for time.Now().Before(deadline) {
		if time.Since(refreshed) > 100*time.Millisecond { // the pool opens connections as it needs them
			if ports, err = c.dbPorts(d.cmd.Process.Pid); err != nil {
				return false, err
			}
			refreshed = time.Now()
		}
		n, err := c.inTransaction(ctx, ports, pattern)
		if err != nil {
			return false, err
		}
		if n == 0 {
			continue
		}
		d.pause()
		if n, err = c.inTransaction(ctx, ports, pattern); err != nil {
			d.resume()
			return false, err
		}
		if n > 0 {
			return true, nil
		}
		d.resume()
	}
	return false, nil
}
