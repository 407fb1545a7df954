package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/postgres"
	"github.com/studio/operator/internal/store/postgres/pgtest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// Several daemons on one PostgreSQL database: real processes
// of the built binary, a real server started by the tests (pgtest), one
// shared data directory (and so one token), as deploy/compose.yaml runs
// them. Leases are short so the tests do not wait long; they wait on
// conditions, never on fixed sleeps.

// clusterLease are the lease flags of the tests' daemons: short, but long
// enough that a loaded machine never misses a renewal by the expiry.
var clusterLease = []string{"--lease-renew", "200ms", "--lease-expiry", "2s"}

var (
	pgMu      sync.Mutex
	pgStarted *pgtest.Server
	pgErr     error
	pgOnce    sync.Once
)

// postgresServer starts the package's PostgreSQL server on first use.
func postgresServer(tb testing.TB) *pgtest.Server {
	tb.Helper()
	pgOnce.Do(func() {
		srv, err := pgtest.Start()
		pgMu.Lock()
		pgStarted, pgErr = srv, err
		pgMu.Unlock()
	})
	if errors.Is(pgErr, pgtest.ErrNoPostgres) && os.Getenv("STUDIO_REQUIRE_POSTGRES") != "1" {
		tb.Skip(pgErr.Error() + " (set STUDIO_REQUIRE_POSTGRES=1 to make this a failure)")
	}
	if pgErr != nil {
		tb.Fatal(pgErr)
	}
	return pgStarted
}

// stopPostgres stops the server if a test started it.
func stopPostgres() {
	pgMu.Lock()
	defer pgMu.Unlock()
	if pgStarted != nil {
		pgStarted.Stop()
	}
}

// cluster is daemons sharing one database and one data directory.
type cluster struct {
	tb   testing.TB
	url  string
	dir  string
	args []string
	ds   []*daemon
	db   *pgx.Conn // the test's own connection, to check rows
}

// newCluster starts n daemons at once on a new, empty database.
func newCluster(tb testing.TB, n int, args ...string) *cluster {
	tb.Helper()
	srv := postgresServer(tb)
	c := &cluster{tb: tb, url: srv.NewDatabase(tb, ""), dir: tb.TempDir()}
	c.args = append(append([]string{"--database", c.url}, clusterLease...), args...)
	for range n {
		c.ds = append(c.ds, c.spawn())
	}
	for _, d := range c.ds {
		d.ready(tb)
	}
	conn, err := pgx.Connect(context.Background(), c.url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	c.db = conn
	tb.Cleanup(func() {
		if tb.Failed() {
			for i, d := range c.ds {
				tb.Logf("--- daemon %d (%s):\n%s", i, d.URL, tail(d.Logs(), 6000))
			}
		}
	})
	return c
}

func (c *cluster) spawn() *daemon { return spawnDaemon(c.tb, c.dir, c.args...) }

// start starts one more daemon on the cluster's database.
func (c *cluster) start() *daemon {
	d := c.spawn()
	d.ready(c.tb)
	c.ds = append(c.ds, d)
	return d
}

// count runs a COUNT query on the cluster's database.
func (c *cluster) count(ctx context.Context, query string, args ...any) int {
	c.tb.Helper()
	var n int
	if err := c.db.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		c.tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// turnStatus reads a turn's status from the database.
func (c *cluster) turnStatus(ctx context.Context, requestID string) string {
	c.tb.Helper()
	var s string
	if err := c.db.QueryRow(ctx, `SELECT status FROM studio_operator_turns WHERE request_id = $1`, requestID).Scan(&s); err != nil {
		c.tb.Fatal(err)
	}
	return s
}

// runner waits until a turn runs and returns the daemon that owns it
// (reading the database).
func (c *cluster) runner(ctx context.Context, requestID string) *daemon {
	c.tb.Helper()
	var owner string
	testutil.Eventually(c.tb, func() bool {
		err := c.db.QueryRow(ctx, `SELECT COALESCE(owner_instance, '') FROM studio_operator_turns WHERE request_id = $1 AND status = 'running'`,
			requestID).Scan(&owner)
		return err == nil && owner != ""
	}, "turn ", requestID, " running")
	for _, d := range c.ds {
		if d.instance(c.tb) == owner {
			return d
		}
	}
	c.tb.Fatalf("turn %s runs on %s, none of the cluster's daemons", requestID, owner)
	return nil
}

// other is the first of the cluster's daemons that is none of not.
func (c *cluster) other(not ...*daemon) *daemon {
	c.tb.Helper()
	for _, d := range c.ds {
		if !slices.Contains(not, d) {
			return d
		}
	}
	c.tb.Fatal("no other daemon")
	return nil
}

// waitStatus waits until a turn has status want (reading the database).
func (c *cluster) waitStatus(ctx context.Context, requestID, want string) {
	c.tb.Helper()
	testutil.Eventually(c.tb, func() bool { return c.turnStatus(ctx, requestID) == want }, "turn ", requestID, " ", want)
}

var instanceRE = regexp.MustCompile(`instance=([0-9a-f-]{36})`)

// instance is the daemon's instance id (from its start-up log).
func (d *daemon) instance(tb testing.TB) string {
	tb.Helper()
	m := instanceRE.FindStringSubmatch(d.Logs())
	if m == nil {
		tb.Fatalf("no instance in the logs:\n%s", d.Logs())
	}
	return m[1]
}

// received is a frame and when the client got it.
type received struct {
	protocol.Frame
	at time.Time
}

// frameLog follows a conversation's stream on one daemon.
type frameLog struct {
	mu      sync.Mutex
	frames  []received
	changed chan struct{}
	err     error
}

// follow streams a conversation from a daemon until the test ends.
func follow(tb testing.TB, d *daemon, convID string, after int64) *frameLog {
	tb.Helper()
	l := &frameLog{changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := d.client.Stream(ctx, convID, after, func(f protocol.Frame) error {
			l.mu.Lock()
			l.frames = append(l.frames, received{f, time.Now()})
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
			return nil
		})
		l.mu.Lock()
		l.err = err
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}()
	tb.Cleanup(func() { cancel(); <-done })
	return l
}

// waitFor waits for the first frame that match accepts.
func (l *frameLog) waitFor(tb testing.TB, ctx context.Context, what string, match func(protocol.Frame) bool) received {
	tb.Helper()
	for {
		l.mu.Lock()
		for _, f := range l.frames {
			if match(f.Frame) {
				l.mu.Unlock()
				return f
			}
		}
		changed, err := l.changed, l.err
		l.mu.Unlock()
		if err != nil {
			tb.Fatalf("waiting for %s: the stream ended: %v", what, err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			tb.Fatalf("waiting for %s: %v; frames: %s", what, ctx.Err(), l.describe())
		}
	}
}

// all returns the frames received so far.
func (l *frameLog) all() []received {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]received(nil), l.frames...)
}

func (l *frameLog) describe() string {
	var b strings.Builder
	for _, f := range l.all() {
		fmt.Fprintf(&b, "\n  %d %s %s", f.Sequence, f.Type, f.Payload)
	}
	return b.String()
}

func textIs(s string) func(protocol.Frame) bool {
	return func(f protocol.Frame) bool {
		p, ok := f.Payload.(protocol.TextPayload)
		return ok && strings.TrimSpace(p.Content) == s
	}
}

func doneOf(requestID string) func(protocol.Frame) bool {
	return func(f protocol.Frame) bool { return f.Type == protocol.FrameDone && f.RequestID == requestID }
}

func outcome(f received) protocol.Outcome { return f.Payload.(protocol.DonePayload).Outcome }

// submit submits a turn at the conversation's current end.
func submit(tb testing.TB, ctx context.Context, d *daemon, convID, instruction string) protocol.TurnAccepted {
	tb.Helper()
	page, err := d.client.GetConversation(ctx, convID, 0, 1)
	if err != nil {
		tb.Fatal(err)
	}
	last := page.LatestSequence
	acc, err := d.client.SubmitTurn(ctx, convID, protocol.TurnRequest{Instruction: instruction,
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
	if err != nil {
		tb.Fatalf("submit %q on %s: %v", instruction, d.URL, err)
	}
	return acc
}

func newConversation(tb testing.TB, ctx context.Context, d *daemon) protocol.Conversation {
	tb.Helper()
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	return conv
}

// slowTurn submits the slow script's turn on d in a new conversation,
// follows it on watcher, and waits until it runs (the model pauses ten
// minutes after "thinking").
func slowTurn(tb testing.TB, ctx context.Context, d, watcher *daemon) (protocol.Conversation, protocol.TurnAccepted, *frameLog) {
	tb.Helper()
	conv := newConversation(tb, ctx, d)
	l := follow(tb, watcher, conv.ID, 0)
	acc := submit(tb, ctx, d, conv.ID, "slow")
	l.waitFor(tb, ctx, "the turn running", textIs("thinking"))
	return conv, acc, l
}

// ownerOf is the owner of an active turn as a daemon's health report says.
func ownerOf(tb testing.TB, ctx context.Context, d *daemon, requestID string) string {
	tb.Helper()
	rep, err := d.client.Doctor(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	for _, t := range rep.Cluster.Turns {
		if t.ID == requestID {
			return t.Owner
		}
	}
	tb.Fatalf("turn %s is not in the health report: %+v", requestID, rep.Cluster.Turns)
	return ""
}

// statusLog collects the status comments (": status {...}") of a stream,
// which the client library leaves out: the active turn's progress.
type statusLog struct {
	mu      sync.Mutex
	states  []string // each comment's state, "" for no turn
	changed chan struct{}
}

// followStatus reads the conversation's stream on d for its status comments.
func (c *cluster) followStatus(tb testing.TB, d *daemon, convID string) *statusLog {
	tb.Helper()
	token, err := os.ReadFile(c.dir + "/token")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/api/operator/conversations/"+convID+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	l := &statusLog{changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), ": status ")
			if !ok {
				continue
			}
			var v struct {
				ActiveTurn *protocol.TurnProgress `json:"activeTurn"`
			}
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				continue
			}
			state := ""
			if v.ActiveTurn != nil {
				state = string(v.ActiveTurn.State)
			}
			l.mu.Lock()
			l.states = append(l.states, state)
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
		}
	}()
	tb.Cleanup(func() { cancel(); <-done })
	return l
}

// waitFor waits until the last status said state ("" for no turn).
func (l *statusLog) waitFor(tb testing.TB, ctx context.Context, state string) {
	tb.Helper()
	for {
		l.mu.Lock()
		n, changed := len(l.states), l.changed
		last := ""
		if n > 0 {
			last = l.states[n-1]
		}
		l.mu.Unlock()
		if n > 0 && last == state {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			l.mu.Lock()
			defer l.mu.Unlock()
			tb.Fatalf("the stream's status never said %q; it said %q", state, l.states)
		}
	}
}

// TestProcessClusterStreamAndCancel: a conversation created on A, a turn
// submitted on B, its stream read live on C, and a cancel sent to A that
// reaches B, the owner, at once: the model is in the middle of a ten
// minute pause, so only an interrupted stream ends the turn in time.
func TestProcessClusterStreamAndCancel(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "--model", "script:"+writeScript(t, slowScript))
	a, b, cc := c.ds[0], c.ds[1], c.ds[2]
	ctx := testCtx(t)
	conv := newConversation(t, ctx, a)
	onC := follow(t, cc, conv.ID, 0)
	statusOnC := c.followStatus(t, cc, conv.ID)
	statusOnC.waitFor(t, ctx, "")
	acc := submit(t, ctx, b, conv.ID, "slow please")
	onC.waitFor(t, ctx, "the user's text on C", textIs("slow please"))
	onC.waitFor(t, ctx, "the model's text on C", textIs("thinking"))
	// C's stream tells its reader that B works on the turn, not only
	// frames: progress of a turn another daemon owns follows its frames.
	statusOnC.waitFor(t, ctx, "working")
	if owner := ownerOf(t, ctx, cc, acc.RequestID); owner != b.instance(t) {
		t.Fatalf("the turn is owned by %q, want B (%s)", owner, b.instance(t))
	}
	turn, err := a.client.Cancel(ctx, conv.ID, acc.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Status != "cancelled" {
		t.Fatalf("cancel on A answered %+v, want the turn cancelled by its owner", turn)
	}
	done := onC.waitFor(t, ctx, "done on C", doneOf(acc.RequestID))
	if outcome(done) != protocol.OutcomeCancelled {
		t.Fatalf("done = %s", done.Payload)
	}
	statusOnC.waitFor(t, ctx, "")
	for i, f := range onC.all() {
		if f.Sequence != int64(i+1) {
			t.Fatalf("C received sequence %d at %d: %s", f.Sequence, i, onC.describe())
		}
	}
	// The conversation goes on, on any daemon.
	next := submit(t, ctx, cc, conv.ID, "hello")
	if d := onC.waitFor(t, ctx, "the next turn's done", doneOf(next.RequestID)); outcome(d) != protocol.OutcomeCompleted {
		t.Fatalf("next turn: %s", d.Payload)
	}
}

// TestProcessClusterKill9Failover: kill -9 of the daemon that runs a turn;
// within the lease expiry another daemon ends it with service_restarted and
// one done; the other daemon's turn runs on; the conversation takes a new
// turn.
func TestProcessClusterKill9Failover(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "--model", "script:"+writeScript(t, slowScript))
	ctx := testCtx(t)
	// A turn submitted to one daemon may run on another, idle one, which
	// claimed it (a busy daemon holds no work hostage): A and B are the
	// daemons the two turns run on, C the third.
	convA, accA, _ := slowTurn(t, ctx, c.ds[0], c.ds[0])
	a := c.runner(ctx, accA.RequestID)
	var b *daemon
	var convB protocol.Conversation
	var accB protocol.TurnAccepted
	for b == nil {
		to := c.other(a)
		conv, acc, l := slowTurn(t, ctx, to, to)
		if d := c.runner(ctx, acc.RequestID); d != a {
			b, convB, accB = d, conv, acc
			break
		}
		// A claimed it too: cancelled, and submitted again.
		if _, err := to.client.Cancel(ctx, conv.ID, acc.RequestID); err != nil {
			t.Fatal(err)
		}
		l.waitFor(t, ctx, "the cancelled turn's done", doneOf(acc.RequestID))
	}
	cc := c.other(a, b)
	onA, onB := follow(t, cc, convA.ID, 0), follow(t, cc, convB.ID, 0)
	onA.waitFor(t, ctx, "A's turn on C", textIs("thinking"))
	onB.waitFor(t, ctx, "B's turn on C", textIs("thinking"))
	deadInstance := a.instance(t)

	killed := time.Now()
	a.kill()
	<-a.exited
	done := onA.waitFor(t, ctx, "the dead daemon's turn ended", doneOf(accA.RequestID))
	t.Logf("kill -9 to done on another daemon: %s", done.at.Sub(killed).Round(time.Millisecond))
	frames := onA.all()
	last := frames[len(frames)-1]
	if last.Sequence != done.Sequence || outcome(done) != protocol.OutcomeFailed {
		t.Fatalf("A's turn ended %s, then more frames: %s", done.Payload, onA.describe())
	}
	e, ok := frames[len(frames)-2].Payload.(protocol.ErrorPayload)
	if !ok || e.Error.Code != protocol.ServiceRestarted {
		t.Fatalf("the frame before done is %s", frames[len(frames)-2].Payload)
	}

	// The conversation takes a new turn, which completes.
	next := submit(t, ctx, cc, convA.ID, "hello")
	if d := onA.waitFor(t, ctx, "the new turn's done", doneOf(next.RequestID)); outcome(d) != protocol.OutcomeCompleted {
		t.Fatalf("new turn: %s", d.Payload)
	}
	// Exactly one done and one error for the dead daemon's turn, whatever
	// the reapers of B and C did meanwhile.
	if n := c.count(ctx, `SELECT COUNT(*) FROM studio_operator_frames WHERE request_id = $1 AND frame_type IN ('done', 'error')`, accA.RequestID); n != 2 {
		t.Fatalf("%d done and error frames for the dead daemon's turn, want one of each", n)
	}
	// B's turn was not touched: still running, owned by B, no done.
	if s := c.turnStatus(ctx, accB.RequestID); s != "running" {
		t.Fatalf("B's turn is %s: %s", s, onB.describe())
	}
	if owner := ownerOf(t, ctx, cc, accB.RequestID); owner != b.instance(t) {
		t.Fatalf("B's turn is owned by %q", owner)
	}
	for _, f := range onB.all() {
		if f.Type == protocol.FrameDone || f.Type == protocol.FrameError {
			t.Fatalf("B's turn got %s: %s", f.Type, f.Payload)
		}
	}
	rep, err := cc.client.Doctor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, in := range rep.Cluster.Instances {
		states[in.ID] = in.State
	}
	if states[deadInstance] != "reaped" || states[b.instance(t)] != "live" || rep.Cluster.Live != 2 {
		t.Fatalf("instances after the kill: %+v", rep.Cluster.Instances)
	}
	for _, d := range []*daemon{b, cc} {
		select {
		case <-d.exited:
			t.Fatalf("a surviving daemon exited:\n%s", d.Logs())
		default:
		}
	}
}

// TestProcessClusterRestartLeavesOthersAlone: a daemon restarted while the
// others run turns fails none of them (a start touches no other daemon's
// queued or running turn); cancels sent to the new daemon reach their
// owners.
func TestProcessClusterRestartLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "--model", "script:"+writeScript(t, slowScript))
	a, b, cc := c.ds[0], c.ds[1], c.ds[2]
	ctx := testCtx(t)
	convB, accB, onB := slowTurn(t, ctx, b, b)
	convC, accC, onC := slowTurn(t, ctx, cc, cc)

	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	a2 := c.start()
	// Let the new daemon's reaper look several times (it looked once
	// before it served).
	waitMetric(t, ctx, a2, "studio_lease_renewals_total", 5)
	for _, acc := range []protocol.TurnAccepted{accB, accC} {
		if s := c.turnStatus(ctx, acc.RequestID); s != "running" {
			t.Fatalf("turn %s is %s after a daemon restarted", acc.RequestID, s)
		}
	}
	for _, l := range []*frameLog{onB, onC} {
		for _, f := range l.all() {
			if f.Type == protocol.FrameDone || f.Type == protocol.FrameError {
				t.Fatalf("a turn of another daemon got %s: %s", f.Type, f.Payload)
			}
		}
	}
	// The new daemon works, and cancels sent to it reach the owners.
	conv := newConversation(t, ctx, a2)
	onA2 := follow(t, a2, conv.ID, 0)
	hello := submit(t, ctx, a2, conv.ID, "hello")
	onA2.waitFor(t, ctx, "a turn on the new daemon", doneOf(hello.RequestID))
	for _, x := range []struct {
		conv string
		acc  protocol.TurnAccepted
		log  *frameLog
	}{{convB.ID, accB, onB}, {convC.ID, accC, onC}} {
		if _, err := a2.client.Cancel(ctx, x.conv, x.acc.RequestID); err != nil {
			t.Fatal(err)
		}
		if d := x.log.waitFor(t, ctx, "the cancelled turn's done", doneOf(x.acc.RequestID)); outcome(d) != protocol.OutcomeCancelled {
			t.Fatalf("done = %s", d.Payload)
		}
	}
}

// waitMetric waits until a daemon's counter reaches at least min.
func waitMetric(tb testing.TB, ctx context.Context, d *daemon, name string, min float64) {
	tb.Helper()
	testutil.Eventually(tb, func() bool { return metric(tb, ctx, d, name) >= min }, name, " at ", min)
}

// metric reads one unlabelled value from a daemon's /metrics.
func metric(tb testing.TB, ctx context.Context, d *daemon, name string) float64 {
	tb.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/metrics", nil)
	token, _ := os.ReadFile(d.dir + "/token")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				tb.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	tb.Fatalf("no %s in /metrics:\n%s", name, body)
	return 0
}

// parkedProposal submits "resume the nightly schedule" (the offline
// model proposes set_schedule_enabled) on d and waits until the turn is
// parked on the proposal.
func parkedProposal(tb testing.TB, ctx context.Context, c *cluster, d *daemon) (protocol.Conversation, protocol.TurnAccepted, protocol.CommandProposal, *frameLog) {
	tb.Helper()
	conv := newConversation(tb, ctx, d)
	l := follow(tb, d, conv.ID, 0)
	acc := submit(tb, ctx, d, conv.ID, "resume the nightly schedule")
	f := l.waitFor(tb, ctx, "the proposal", func(f protocol.Frame) bool { return f.Type == protocol.FrameProposal })
	prop := f.Payload.(protocol.ProposalPayload).Proposal
	if prop.CommandType != "set_schedule_enabled" {
		tb.Fatalf("proposal %+v", prop)
	}
	c.waitStatus(ctx, acc.RequestID, "awaiting_confirmation")
	return conv, acc, prop, l
}

// auditDecisions counts a proposal's audit rows by decision.
func (c *cluster) auditDecisions(ctx context.Context, proposalID string) map[string]int {
	c.tb.Helper()
	rows, err := c.db.Query(ctx, `SELECT details::jsonb->>'decision' FROM admin_events WHERE target_id = $1`, proposalID)
	if err != nil {
		c.tb.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			c.tb.Fatal(err)
		}
		out[d]++
	}
	return out
}

// TestProcessClusterConfirmAfterOwnerKilled: a turn waits for a human on
// A, A is killed; the confirm sent to B executes once and the turn goes on
// there to its end.
func TestProcessClusterConfirmAfterOwnerKilled(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	a, b := c.ds[0], c.ds[1]
	ctx := testCtx(t)
	conv, acc, prop, _ := parkedProposal(t, ctx, c, a)
	a.kill()
	<-a.exited
	res, err := b.client.Confirm(ctx, conv.ID, prop.ID, protocol.ConfirmProposalRequest{ExpectedCommandHash: prop.CommandHash})
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm on B: %+v, %v", res, err)
	}
	onB := follow(t, b, conv.ID, 0)
	if d := onB.waitFor(t, ctx, "the turn's done", doneOf(acc.RequestID)); outcome(d) != protocol.OutcomeCompleted {
		t.Fatalf("turn after the confirm: %s%s", d.Payload, onB.describe())
	}
	if got := c.auditDecisions(ctx, prop.ID); got["confirmed"] != 1 || got["executed"] != 1 || got["indeterminate"] != 0 {
		t.Fatalf("audit decisions %v, want one confirmed and one executed", got)
	}
	if n := c.count(ctx, `SELECT COUNT(*) FROM studio_schedules WHERE name = 'nightly-audit' AND enabled = 1 AND version = 2`); n != 1 {
		t.Fatal("the schedule was not enabled exactly once")
	}
}

// TestProcessClusterConfirmsAndRunsOnce: twenty confirms of one proposal
// spread over three daemons execute it once; runs launched on any daemon
// are each claimed and executed once by the daemons' free workers.
func TestProcessClusterConfirmsAndRunsOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	ctx := testCtx(t)
	conv, acc, prop, l := parkedProposal(t, ctx, c, c.ds[0])
	statusOnC := c.followStatus(t, c.ds[2], conv.ID)
	statusOnC.waitFor(t, ctx, "awaiting_confirmation")
	results := make([]protocol.ProposalResult, 20)
	errs := make([]error, 20)
	var wg sync.WaitGroup
	for i := range results {
		d := c.ds[i%3]
		wg.Go(func() {
			results[i], errs[i] = d.client.Confirm(ctx, conv.ID, prop.ID, protocol.ConfirmProposalRequest{ExpectedCommandHash: prop.CommandHash})
		})
	}
	wg.Wait()
	succeeded := 0
	for i, res := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("confirm %d: %v", i, errs[i])
		case res.Status == protocol.ResultSucceeded:
			succeeded++
		case res.Status != protocol.ResultExecuting:
			t.Fatalf("confirm %d answered %+v", i, res)
		}
	}
	if succeeded == 0 {
		t.Fatalf("no confirm answered succeeded: %+v", results)
	}
	if d := l.waitFor(t, ctx, "the turn's done", doneOf(acc.RequestID)); outcome(d) != protocol.OutcomeCompleted {
		t.Fatalf("turn: %s", d.Payload)
	}
	statusOnC.waitFor(t, ctx, "") // the decision and the end reached C's reader too
	if got := c.auditDecisions(ctx, prop.ID); got["confirmed"] != 1 || got["executed"] != 1 {
		t.Fatalf("audit decisions %v, want one confirmed and one executed", got)
	}
	if n := c.count(ctx, `SELECT COUNT(*) FROM studio_schedules WHERE name = 'nightly-audit' AND enabled = 1 AND version = 2`); n != 1 {
		t.Fatal("the schedule was not enabled exactly once")
	}

	// Runs: launched on every daemon at once; each daemon's idle workers
	// are told, and each run is claimed once (created 1, claimed 2,
	// finished 3).
	const runs = 9
	ids := make([]string, runs)
	for i := range ids {
		d := c.ds[i%3]
		wg.Go(func() {
			var r studio.Run
			errs[i] = d.client.Do(ctx, http.MethodPost, "/api/app/playbooks/summarize-failed-runs/launch", map[string]any{"input": "none"}, &r)
			ids[i] = r.ID
		})
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	for _, id := range ids {
		testutil.Eventually(t, func() bool {
			var status string
			var version int
			if err := c.db.QueryRow(ctx, `SELECT status, version FROM studio_runs WHERE id = $1`, id).Scan(&status, &version); err != nil {
				t.Fatal(err)
			}
			if status == "succeeded" || status == "failed" || status == "cancelled" {
				if status != "succeeded" || version != 3 {
					t.Fatalf("run %s ended %s at version %d, want succeeded at 3 (one claim, one finish)", id, status, version)
				}
				return true
			}
			return false
		}, "run ", id, " ended")
	}
}

// TestProcessClusterStartTogether: three daemons started at the same
// instant on an empty database and one data directory: one schema, one
// set of starter rows, one token.
func TestProcessClusterStartTogether(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	ctx := testCtx(t)
	ms, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if n := c.count(ctx, `SELECT COUNT(DISTINCT version) FROM schema_migrations`); n != len(ms) || c.count(ctx, `SELECT COUNT(*) FROM schema_migrations`) != len(ms) {
		t.Fatalf("schema_migrations has %d versions, want each of %d once", n, len(ms))
	}
	if n := c.count(ctx, `SELECT COUNT(*) FROM studio_playbooks`); n != len(studio.StarterPlaybooks) {
		t.Fatalf("%d playbooks, want the %d starters once", n, len(studio.StarterPlaybooks))
	}
	if n := c.count(ctx, `SELECT COUNT(*) FROM studio_schedules`); n != len(studio.StarterSchedules) {
		t.Fatalf("%d schedules", n)
	}
	if n := c.count(ctx, `SELECT COUNT(*) FROM admin_events WHERE action = $1`, studio.ActionSeeded); n != 1 {
		t.Fatalf("%d seeded audit rows, want 1", n)
	}
	for _, d := range c.ds {
		if _, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{}); err != nil {
			t.Fatalf("%s: %v", d.URL, err)
		}
	}
	rep, err := c.ds[0].client.Doctor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cluster.Live != 3 || rep.Cluster.Lease.RenewSeconds != 0.2 || rep.Cluster.Lease.ExpirySeconds != 2 || rep.Cluster.Self != c.ds[0].instance(t) {
		t.Fatalf("cluster report %+v", rep.Cluster)
	}
	if v := metric(t, ctx, c.ds[1], "studio_instances"); v != 3 {
		waitMetric(t, ctx, c.ds[1], "studio_instances", 3)
	}
}
