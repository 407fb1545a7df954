package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/postgres/pgtest"
)

// Fault tests on three daemons (see cluster_fault_harness_test.go). They
// do not run in parallel with the package's other tests: pauses and lease
// timings should not compete with dozens of other daemons for two cores.

// TestClusterFaultPauseBetweenConfirmAndExecute: the daemon a confirm
// reached is paused (SIGSTOP) 0–20 ms after the confirm was sent — before,
// inside or after its confirm and execution — until the others reaped
// it, then continued. Whatever the confirming client was answered, the
// database must show the confirmed command ran at most once and never
// after the cluster audited it indeterminate ("it will not run again").
// Repeated with random pause points within a time budget.
func TestClusterFaultPauseBetweenConfirmAndExecute(t *testing.T) {
	skipLong(t)
	const budget, minTrials, maxTrials = 45 * time.Second, 4, 12
	rng := faultSeed(t)
	c := newFaultCluster(t, postgresServer(t), false, 3,
		append(append([]string{"--model", "script:" + faultScript(t, maxTrials, 0, 0), "--workers", "16"}, clusterLease...), faultFlags...)...)
	ctx, cancel := context.WithTimeout(t.Context(), budget+4*time.Minute)
	defer cancel()

	type trial struct {
		delay    time.Duration
		answer   string
		rejoined bool
	}
	var trials []trial
	start := time.Now()
	for i := 0; i < maxTrials && (i < minTrials || time.Since(start) < budget); i++ {
		parker, confirmer := c.d(i%3), c.d((i+1)%3)
		conv, req := c.mustStartTurn(ctx, parker, launchWord(i))
		p, err := c.parkedProposal(ctx, conv, req)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := c.instanceOf(ctx, confirmer)
		if err != nil {
			t.Fatalf("the confirming daemon's instance: %v", err)
		}
		tr := trial{delay: time.Duration(rng.Int64N(int64(20*time.Millisecond) + 1))}
		answered := make(chan string, 1)
		go func() {
			actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			res, err := confirm(actx, confirmer, p)
			if err != nil {
				answered <- "error: " + err.Error()
				return
			}
			s := string(res.Status)
			if res.Error != nil {
				s += " (" + string(res.Error.Code) + ")"
			}
			answered <- s
		}()
		time.Sleep(tr.delay) // the pause point: a chosen delay after the confirm was sent
		confirmer.pause()
		paused := time.Now()
		c.waitUntil(ctx, "the paused daemon reaped", func(ctx context.Context) (bool, error) { return c.reaped(ctx, inst) })
		reapedAfter := time.Since(paused)
		confirmer.resume()
		select {
		case tr.answer = <-answered:
		case <-ctx.Done():
			t.Fatalf("trial %d: the confirm was never answered", i)
		}
		if tr.rejoined = c.rejoinedOrExited(ctx, confirmer, inst); !tr.rejoined {
			// A daemon told to exit when it loses its lease did: start
			// one again so the next trials have three.
			t.Logf("trial %d: the paused daemon exited after it was continued", i)
			if _, err := c.restart((i + 1) % 3); err != nil {
				t.Fatal(err)
			}
		}
		trials = append(trials, tr)
		t.Logf("trial %d: paused %v after the confirm was sent, reaped %v later, confirm answered %s",
			i, tr.delay.Round(100*time.Microsecond), reapedAfter.Round(time.Millisecond), tr.answer)
		rep, err := c.checkLaunches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range rep.violations {
			t.Errorf("trial %d: %s", i, v)
		}
		if t.Failed() {
			t.Fatalf("stopping after trial %d:\n%s", i, c.logTails())
		}
	}
	// A late execution would show now: every daemon answers again.
	for _, d := range c.daemons() {
		if !waitRunning(ctx, d) {
			t.Fatalf("a daemon does not answer:\n%s", c.logTails())
		}
	}
	rep, err := c.checkLaunches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.violations {
		t.Error(v)
	}
	t.Logf("%d trials in %v: %d proposals %v, audit decisions %v, %d runs",
		len(trials), time.Since(start).Round(time.Second), rep.proposals, rep.byStatus, rep.decisions, rep.runs)
}

// rejoinedOrExited waits until a continued daemon whose instance was
// reaped has either rejoined as a new live instance and answers (true)
// or exited (false).
func (c *faultCluster) rejoinedOrExited(ctx context.Context, d *daemon, reaped string) bool {
	c.t.Helper()
	c.waitUntil(ctx, "the continued daemon rejoined or exited", func(ctx context.Context) (bool, error) {
		if !d.running() {
			return true, nil
		}
		inst, err := c.instanceOf(ctx, d)
		if err != nil || inst == reaped {
			return false, err
		}
		return true, nil
	})
	return waitRunning(ctx, d)
}

// waitRunning waits until d answers its health report (a continued
// daemon catches up first); false when it exited instead.
func waitRunning(ctx context.Context, d *daemon) bool {
	err := poll(ctx, "the daemon answers", func(ctx context.Context) (bool, error) {
		if !d.running() {
			return true, nil
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := d.client.Doctor(rctx)
		return err == nil, err
	})
	return err == nil && d.running()
}

// TestClusterFaultPauseInRenewalAndConfirm: a daemon paused (SIGSTOP) at
// a random point while it renews its lease (every 200 ms) and runs a
// turn, or while it confirms a proposal, holds whatever it held; the
// others reap it and a confirm of another proposal (launching the same
// playbook) on another daemon succeeds, both within the lease expiry and
// a margin. The bound aimed at is expiry + 1 s; the test asserts a
// generous expiry + 10 s (a busy CI machine) and logs what it measured.
func TestClusterFaultPauseInRenewalAndConfirm(t *testing.T) {
	skipLong(t)
	const trials = 4
	const bound = leaseExpiry + 10*time.Second
	c := newFaultCluster(t, postgresServer(t), false, 3,
		append(append([]string{"--model", "script:" + faultScript(t, 2*trials, 0, 0), "--workers", "16"}, clusterLease...), faultFlags...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var reaps, confirms, failovers []time.Duration
	for i := range trials {
		kind := []string{"renewal", "confirm"}[i%2]
		a, b, other := c.d(0), c.d(1), c.d(2)
		// The proposal confirmed on b while a is paused, parked on the third daemon.
		conv2, req2 := c.mustStartTurn(ctx, other, launchWord(2*i+1))
		p2, err := c.parkedProposal(ctx, conv2, req2)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := c.instanceOf(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		var slowReq string
		var answered chan string
		if kind == "renewal" {
			// a runs a turn the others must take over.
			_, slowReq = c.mustStartTurn(ctx, a, "zqslow")
			c.waitUntil(ctx, "the slow turn running on the daemon to pause", func(ctx context.Context) (bool, error) {
				var n int
				err := c.pool.QueryRow(ctx, `SELECT COUNT(*) FROM studio_operator_frames WHERE request_id = $1 AND btrim(payload_json->>'content') = 'thinking'`, slowReq).Scan(&n)
				return n == 1, err
			})
		}
		var caught bool
		if kind == "renewal" {
			// Inside its lease transaction (a renewal, or its own reaper's
			// look): its instance row, or the rows it locked, stay locked
			// while it is paused.
			// The renewal's update and the read after it first (the
			// instance row locked), then any lease statement.
			caught, err = c.pauseInside(ctx, a, `UPDATE studio_instances SET heartbeat_at|FROM studio_instances WHERE id = `, 6*time.Second)
			if err == nil && !caught {
				caught, err = c.pauseInside(ctx, a, `studio_instances`, 6*time.Second)
			}
		} else {
			conv1, req1 := c.mustStartTurn(ctx, other, launchWord(2*i))
			p1, perr := c.parkedProposal(ctx, conv1, req1)
			if perr != nil {
				t.Fatal(perr)
			}
			answered = make(chan string, 1)
			go func() {
				actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				res, err := confirm(actx, a, p1)
				answered <- fmt.Sprintf("%s %v", res.Status, err)
			}()
			// Inside one of the confirm's transactions: the proposal's, the
			// run's (the same playbook as the other confirm's), the audit's.
			caught, err = c.pauseInside(ctx, a, `studio_operator_proposals|studio_operator_turns|studio_operator_frames|studio_runs|studio_playbooks|admin_events`, 5*time.Second)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !caught { // no such transaction seen: paused wherever it is
			a.pause()
		}
		paused := time.Now()
		var wg sync.WaitGroup
		var confirmAnswer string
		var confirmTook time.Duration
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, bound+30*time.Second)
			defer cancel()
			res, err := confirm(cctx, b, p2)
			confirmTook = time.Since(paused)
			confirmAnswer = fmt.Sprintf("%s %v", res.Status, err)
			if err == nil && res.Status != protocol.ResultSucceeded {
				confirmAnswer += fmt.Sprintf(" %+v", res.Error)
			}
			if err == nil && res.Status == protocol.ResultSucceeded {
				confirmAnswer = "succeeded"
			}
		})
		rctx, rcancel := context.WithTimeout(ctx, bound+20*time.Second)
		if err := poll(rctx, "the paused daemon reaped", func(ctx context.Context) (bool, error) { return c.reaped(ctx, inst) }); err != nil {
			t.Errorf("trial %d (paused inside a %s transaction: %v): %v", i, kind, caught, err)
		}
		reapTook := time.Since(paused)
		var failoverTook time.Duration
		if slowReq != "" {
			err := poll(rctx, "the paused daemon's turn ended elsewhere", func(ctx context.Context) (bool, error) {
				var n int
				err := c.pool.QueryRow(ctx, `SELECT COUNT(*) FROM studio_operator_frames WHERE request_id = $1 AND frame_type = 'done'`, slowReq).Scan(&n)
				return n > 0, err
			})
			if err != nil {
				t.Errorf("trial %d: %v", i, err)
			}
			failoverTook = time.Since(paused)
			failovers = append(failovers, failoverTook)
		}
		rcancel()
		wg.Wait()
		a.resume()
		reaps, confirms = append(reaps, reapTook), append(confirms, confirmTook)
		t.Logf("trial %d (paused inside a %s transaction: %v): reaped after %v, turn taken over after %v, the other confirm answered %s after %v",
			i, kind, caught, reapTook.Round(time.Millisecond), failoverTook.Round(time.Millisecond), confirmAnswer, confirmTook.Round(time.Millisecond))
		if confirmAnswer != "succeeded" {
			t.Errorf("trial %d: the confirm on another daemon answered %s", i, confirmAnswer)
		}
		if reapTook > bound || confirmTook > bound || failoverTook > bound {
			t.Errorf("trial %d: reap %v, takeover %v, confirm %v: over the safety bound %v (the aim is expiry + 1 s = %v)",
				i, reapTook, failoverTook, confirmTook, bound, leaseExpiry+time.Second)
		}
		if answered != nil {
			select {
			case s := <-answered:
				t.Logf("trial %d: the paused daemon's own confirm answered %s", i, s)
			case <-ctx.Done():
				t.Fatalf("trial %d: the paused daemon's confirm was never answered", i)
			}
		}
		if !c.rejoinedOrExited(ctx, a, inst) {
			t.Logf("trial %d: the paused daemon exited after it was continued", i)
			if _, err := c.restart(0); err != nil {
				t.Fatal(err)
			}
		}
		if t.Failed() {
			t.Fatalf("stopping after trial %d:\n%s", i, c.logTails())
		}
	}
	rep, err := c.checkLaunches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.violations {
		t.Error(v)
	}
	t.Logf("pause to reap %s; to takeover %s; to the other daemon's confirm %s (lease expiry %v)",
		spread(reaps), spread(failovers), spread(confirms), leaseExpiry)
}

// spread is the minimum, median and maximum of durations.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %v median %v max %v (n=%d)", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]), len(s))
}

// pacedTurns starts n paced turns spread evenly over the cluster's
// daemons and waits until every one has said "started".
func (c *faultCluster) pacedTurns(ctx context.Context, n int) []string {
	c.t.Helper()
	return c.pacedTurnsOn(ctx, n, func(i int) int { return i % len(c.daemons()) })
}

// pacedTurnsOn is pacedTurns with turn i submitted to slot on(i).
func (c *faultCluster) pacedTurnsOn(ctx context.Context, n int, on func(i int) int) []string {
	c.t.Helper()
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		d := c.d(on(i))
		wg.Go(func() { _, ids[i], errs[i] = c.startTurnAgain(ctx, d, "zqpaced") })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
	c.waitUntil(ctx, fmt.Sprintf("%d turns running", n), func(ctx context.Context) (bool, error) {
		k, err := c.countStarted(ctx, ids)
		return k == n, err
	})
	return ids
}

// noneDone fails the test when a turn of ids already ended: the fault
// would then not hit it mid-flight, and the test would prove less.
func (c *faultCluster) noneDone(ctx context.Context, ids []string) {
	c.t.Helper()
	ends, err := c.turnEnds(ctx, ids)
	if err != nil {
		c.t.Fatal(err)
	}
	for id, e := range ends {
		if e.dones > 0 {
			c.t.Fatalf("turn %s ended (%s) before the fault: make the paced turns longer", id, e.status)
		}
	}
}

// TestClusterFaultDatabaseRestartUnderTurns: a fast restart of PostgreSQL
// (`pg_ctl restart -m fast`: sessions ended, transactions rolled back,
// the server back within about a second) under 30 turns streaming tokens
// on three daemons: every turn completes — its writes retried through the
// restart — with no error frame, and every daemon still runs. Leases here
// are longer than the restart, so only riding out the database is tested.
func TestClusterFaultDatabaseRestartUnderTurns(t *testing.T) {
	skipLong(t)
	const turns = 30
	srv := pgtest.New(t)
	c := newFaultCluster(t, srv, true, 3,
		append([]string{"--model", "script:" + faultScript(t, 0, 150, 100*time.Millisecond), "--workers", "32",
			"--lease-renew", "1s", "--lease-expiry", "10s"}, faultFlags...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ids := c.pacedTurns(ctx, turns)
	c.noneDone(ctx, ids)
	began := time.Now()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL restarted (fast) in %v under %d running turns", time.Since(began).Round(time.Millisecond), turns)
	ends := c.waitTurnsEnded(ctx, ids)
	t.Logf("turn outcomes after the restart: %v", outcomeCounts(ends))
	var notCompleted []string
	for id, e := range ends {
		if e.status != "completed" || e.outcomes != "completed" {
			notCompleted = append(notCompleted, fmt.Sprintf("%s ended %s (done %s)", id, e.status, e.outcomes))
		}
	}
	if len(notCompleted) > 0 {
		t.Errorf("%d of %d turns did not complete through the restart, e.g. %s", len(notCompleted), turns, notCompleted[0])
	}
	// Clients saw the restart as progress at most, never as an error frame.
	var errorFrames int
	if err := c.pool.QueryRow(ctx, `SELECT COUNT(*) FROM studio_operator_frames WHERE request_id = ANY($1) AND frame_type = 'error'`, ids).Scan(&errorFrames); err != nil {
		t.Fatal(err)
	}
	if errorFrames > 0 {
		t.Errorf("%d error frames in the turns that rode out the restart", errorFrames)
	}
	for i, d := range c.daemons() {
		if !d.running() {
			t.Errorf("daemon %d exited", i)
		}
	}
	if t.Failed() {
		t.Log(c.logTails())
	}
}

// TestClusterFaultDatabaseOutageLongerThanExpiry: PostgreSQL stopped for
// three lease expiries (6 s) under running turns, then started: no daemon
// exits (the first to reconnect must not reap the others as dead), every
// turn submitted before the outage ends exactly once, and every daemon
// takes new turns afterwards.
func TestClusterFaultDatabaseOutageLongerThanExpiry(t *testing.T) {
	skipLong(t)
	const turns = 9
	srv := pgtest.New(t)
	c := newFaultCluster(t, srv, true, 3,
		append(append([]string{"--model", "script:" + faultScript(t, 0, 120, 100*time.Millisecond), "--workers", "16"}, clusterLease...), faultFlags...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ids := c.pacedTurns(ctx, turns)
	c.noneDone(ctx, ids)
	srv.Shutdown()
	outage := 3 * leaseExpiry
	select { // the outage's length is the fault, not a wait for something
	case <-time.After(outage):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := srv.StartAgain(); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL was down for %v (lease expiry %v)", outage, leaseExpiry)
	ends := c.waitTurnsEnded(ctx, ids)
	t.Logf("outcomes of the turns submitted before the outage: %v", outcomeCounts(ends))
	for i, d := range c.daemons() {
		if !waitRunning(ctx, d) {
			t.Errorf("daemon %d exited after the outage:\n%s", i, d.Logs())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// Every daemon takes a new turn, which completes.
	var fresh []string
	for i, d := range c.daemons() {
		// A daemon may still be catching up (a rejoin): it may refuse for
		// a moment, not for good.
		var req string
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := poll(sctx, fmt.Sprintf("a new turn accepted by daemon %d", i), func(ctx context.Context) (bool, error) {
			var err error
			_, req, err = startTurn(ctx, d, "hello")
			return err == nil, err
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		fresh = append(fresh, req)
	}
	for id, e := range c.waitTurnsEnded(ctx, fresh) {
		if e.status != "completed" {
			t.Errorf("a new turn %s after the outage ended %s", id, e.status)
		}
	}
	for i, d := range c.daemons() {
		if !d.running() {
			t.Errorf("daemon %d exited", i)
		}
	}
	c.waitTurnsEnded(ctx, nil) // and nothing else in the database ended twice
}

// TestClusterFaultKill9Under60Turns: with short leases (200 ms/2 s) and
// 60 turns running on three daemons, five sixths of them on one, that
// daemon is killed (SIGKILL): the others take its turns over and every
// turn ends, exactly once — none stays running (a takeover whose commit
// landed although its caller saw a timeout, which many takeovers in one
// short lease period make likely, must not be forgotten). Three rounds,
// killing a different daemon each time; in the last the database commits
// each takeover 300 ms late (longer than a renewal period).
func TestClusterFaultKill9Under60Turns(t *testing.T) {
	skipLong(t)
	const turns, rounds = 60, 3
	c := newFaultCluster(t, postgresServer(t), false, 3,
		append(append([]string{"--model", "script:" + faultScript(t, 0, 40, 100*time.Millisecond), "--workers", "64"}, clusterLease...), faultFlags...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	for round := range rounds {
		mode := "the database as it is"
		if round == rounds-1 {
			// From now on the database commits takeovers slowly: slower
			// than a renewal period, far under the lease expiry. A
			// takeover needs a deadline of its own, not what is left of
			// the renewal's.
			c.slowTakeovers(ctx, 300*time.Millisecond)
			mode = "takeovers committed 300 ms late"
		}
		ids := c.pacedTurnsOn(ctx, turns, func(i int) int {
			if i%6 != 5 { // five sixths on the daemon to kill
				return round % 3
			}
			return (round + 1 + i/6%2) % 3
		})
		victim := c.d(round % 3)
		killed := time.Now()
		victim.kill()
		<-victim.exited
		rctx, rcancel := context.WithTimeout(ctx, time.Minute) // the turns last 4 s, a takeover about 2 s
		c.t.Logf("round %d: %s", round, mode)
		ends := c.waitTurnsEnded(rctx, ids)
		rcancel()
		took := time.Since(killed)
		victims, survivors := map[string]turnEnd{}, map[string]turnEnd{}
		for i, id := range ids {
			if i%6 != 5 {
				victims[id] = ends[id]
			} else {
				survivors[id] = ends[id]
			}
		}
		// The survivors' turns should complete; a busy machine may make a
		// survivor miss its renewals, so that is reported, not asserted.
		t.Logf("round %d (%s): kill -9 of daemon %d under %d running turns; all ended within %v: the killed daemon's %v, the others' %v",
			round, mode, round%3, turns, took.Round(time.Millisecond), outcomeCounts(victims), outcomeCounts(survivors))
		if t.Failed() {
			t.Fatal(c.logTails())
		}
		if _, err := c.restart(round % 3); err != nil {
			t.Fatal(err)
		}
	}
	ends := c.waitTurnsEnded(ctx, nil)
	var running []string
	for id, e := range ends {
		if e.status == "running" {
			running = append(running, id)
		}
	}
	if len(running) > 0 {
		t.Fatalf("turns still running: %s", strings.Join(running, ", "))
	}
}

// slowTakeovers makes the database delay, at commit, each transaction that
// moves a turn from one owner instance to another (a takeover; a claim of
// a queued turn by another daemon too) by delay: a slow database, for the
// test's database only.
func (c *faultCluster) slowTakeovers(ctx context.Context, delay time.Duration) {
	c.t.Helper()
	_, err := c.pool.Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION fault_slow_takeover() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(%f); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER fault_slow_takeover AFTER UPDATE OF owner_instance ON studio_operator_turns
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
		WHEN (OLD.owner_instance IS NOT NULL AND NEW.owner_instance IS NOT NULL AND OLD.owner_instance <> NEW.owner_instance)
		EXECUTE FUNCTION fault_slow_takeover()`, delay.Seconds()))
	if err != nil {
		c.t.Fatal(err)
	}
}
