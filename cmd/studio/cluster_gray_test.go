package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/postgres"
)

// Gray failures on three daemons (cluster_fault_harness_test.go): one
// daemon's database connections hang while PostgreSQL itself stays up —
// its server processes frozen with whatever they hold, or its link to the
// database stuck (a proxy that stops forwarding). The cluster must reap
// it on time, it must fence itself meanwhile, every confirm it is sent
// must be answered, and every proposal it confirmed must end executed or
// not executed, never indeterminate. The lease here is 200 ms / 2 s and a
// database call's deadline half the expiry (1 s).

// grayCallTimeout is the daemons' database call deadline: half the lease
// expiry, as studio serve derives it.
const grayCallTimeout = leaseExpiry / 2

// confirmBound is the longest a confirm may wait for its answer on a
// daemon whose connections hang (docs/scale-out.md): the lease expiry
// (after it the daemon fences itself and answers at once) plus one call's
// deadline (the call in flight when it lapses).
const confirmBound = leaseExpiry + grayCallTimeout

// boundSlack is what a loaded two-core CI machine may add to a bound the
// tests check (scheduling: the daemon looks at its lease every 100 ms,
// and the test's own goroutines wait for the CPU too); they log what
// they measured. A confirm over the bound fails the test: an owner that
// sat in a database call past the lease's lapse left one unanswered
// until the link came back.
const boundSlack = time.Second

// answered says whether a confirm got an answer: a result or a typed
// error, not a request that failed on its way (the daemon never answered).
func (a answer) answered() bool { return a.err == nil || protocol.CodeOf(a.err) != "" }

// backendPids are the server processes of d's sessions: their
// application_name names d's process (postgres.ApplicationName).
func (c *faultCluster) backendPids(ctx context.Context, d *daemon) ([]int, error) {
	rows, err := c.pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, postgres.ApplicationName(d.cmd.Process.Pid))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// frozenDaemon is a daemon whose every database session hangs: its server
// processes stopped (SIGSTOP) with what they hold, its proxy stopped so
// that a new connection hangs too.
type frozenDaemon struct {
	pids  []int
	proxy *tcpProxy
}

// freeze freezes every database session of slot i's daemon (a proxied
// cluster's).
func (c *faultCluster) freeze(ctx context.Context, i int) (*frozenDaemon, error) {
	f := &frozenDaemon{proxy: c.proxies[i]}
	f.proxy.stop()
	pids, err := c.backendPids(ctx, c.d(i))
	if err != nil {
		f.proxy.resume()
		return nil, err
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err == nil {
			f.pids = append(f.pids, pid)
		}
	}
	return f, nil
}

// thaw lets the frozen sessions and the link go on.
func (f *frozenDaemon) thaw() {
	for _, pid := range f.pids {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	f.proxy.resume()
}

// freezeInside freezes slot i's daemon's sessions the moment one of them
// is seen inside a transaction whose statement matches pattern, or after
// within if none is; caught says one was frozen inside.
func (c *faultCluster) freezeInside(ctx context.Context, i int, pattern string, within time.Duration) (f *frozenDaemon, caught bool, err error) {
	name := postgres.ApplicationName(c.d(i).cmd.Process.Pid)
	inside := func() (bool, error) {
		var n int
		err := c.pool.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL AND query ~* $2`,
			name, pattern).Scan(&n)
		return n > 0, err
	}
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		in, err := inside()
		if err != nil {
			return nil, false, err
		}
		if in {
			break
		}
	}
	if f, err = c.freeze(ctx, i); err != nil {
		return nil, false, err
	}
	caught, err = inside() // the frozen sessions' state stays as it was
	return f, caught, err
}

// answer is a confirm's answer and how long it took.
type answer struct {
	res  protocol.ProposalResult
	err  error
	took time.Duration
}

func (a answer) String() string {
	return fmt.Sprintf("%s after %v", answerKind(a.res, a.err), a.took.Round(time.Millisecond))
}

// confirmAsync confirms p on d in the background; the answer comes on the
// channel.
func confirmAsync(ctx context.Context, d *daemon, p parked) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		began := time.Now()
		res, err := confirm(actx, d, p)
		out <- answer{res, err, time.Since(began)}
	}()
	return out
}

// hold waits out a fault's duration (the fault, not a wait for something).
func hold(ctx context.Context, until time.Time) {
	select {
	case <-time.After(time.Until(until)):
	case <-ctx.Done():
	}
}

// proposalEnd is a proposal as it ended, from the database.
type proposalEnd struct {
	status, code string
	executed     *float64 // executed_at
	readBack     bool     // its result was read back by a takeover
}

// settled waits until proposal id is neither pending nor executing, or
// pending with its turn ended; it returns it as it then is.
func (c *faultCluster) settled(ctx context.Context, id string) proposalEnd {
	c.t.Helper()
	var e proposalEnd
	c.waitUntil(ctx, "proposal "+id+" settled", func(ctx context.Context) (bool, error) {
		err := c.pool.QueryRow(ctx, `SELECT status, COALESCE(error_code, ''), executed_at, COALESCE(result_json::jsonb->'readBack' = 'true', false)
			FROM studio_operator_proposals WHERE id = $1`, id).Scan(&e.status, &e.code, &e.executed, &e.readBack)
		return err == nil && e.status != "pending" && e.status != "executing", err
	})
	return e
}

// indeterminates counts the indeterminate audit rows and the proposals
// left executing.
func (c *faultCluster) indeterminates(ctx context.Context) (audits, executing int, err error) {
	if err = c.pool.QueryRow(ctx, `SELECT COUNT(*) FROM admin_events WHERE action = 'studio.operator.command'
		AND details::jsonb->>'decision' = 'indeterminate'`).Scan(&audits); err != nil {
		return 0, 0, err
	}
	err = c.pool.QueryRow(ctx, `SELECT COUNT(*) FROM studio_operator_proposals WHERE status = 'executing'`).Scan(&executing)
	return audits, executing, err
}

// reapedAt is when an instance's reaping committed (the database's clock)
// and the lease it had then (its own clock, the same machine's).
func (c *faultCluster) reapedAt(ctx context.Context, instance string) (committed, leaseEnd time.Time, err error) {
	var end float64
	err = c.pool.QueryRow(ctx, `SELECT pg_xact_commit_timestamp(r.xmin), i.lease_expires_at FROM studio_instance_reaps r
		JOIN studio_instances i ON i.id = r.instance_id WHERE r.instance_id = $1`, instance).Scan(&committed, &end)
	return committed, time.Unix(0, int64(end*1e9)), err
}

// endedAfter says whether turn id's done frame committed after t.
func (c *faultCluster) endedAfter(ctx context.Context, id string, t time.Time) (bool, error) {
	var after bool
	err := c.pool.QueryRow(ctx, `SELECT COALESCE(bool_and(pg_xact_commit_timestamp(xmin) > $2), false) FROM studio_operator_frames
		WHERE request_id = $1 AND frame_type = 'done'`, id, t).Scan(&after)
	return after, err
}

// parkOn parks launch proposal n's turn on d.
func (c *faultCluster) parkOn(ctx context.Context, d *daemon, n int) parked {
	c.t.Helper()
	conv, req := c.mustStartTurn(ctx, d, launchWord(n))
	p, err := c.parkedProposal(ctx, conv, req)
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// finishPending confirms p on d if it is still pending (a confirm that
// was refused, or answered before it was recorded), so that its turn
// ends; it says whether it did.
func (c *faultCluster) finishPending(ctx context.Context, d *daemon, p parked) bool {
	c.t.Helper()
	var status string
	if err := c.pool.QueryRow(ctx, `SELECT status FROM studio_operator_proposals WHERE id = $1`, p.id).Scan(&status); err != nil {
		c.t.Fatal(err)
	}
	if status != "pending" {
		return false
	}
	res, err := confirm(ctx, d, p)
	if err != nil || (res.Status != protocol.ResultSucceeded && res.Status != protocol.ResultFailed) {
		c.t.Fatalf("confirm of %s, still pending, on a healthy daemon = %s", p.id, answerKind(res, err))
	}
	return true
}

// TestClusterGrayFrozenBackends: right after a confirm sent to it, every
// database session of one daemon hangs for 3 × the lease expiry — its
// server processes stopped (SIGSTOP) with whatever they hold, caught when
// one is inside a transaction on its instance's row (a renewal, a fence),
// and its new connections going nowhere. It is reaped within about the
// expiry (asserted: before the sessions come back; the aim, expiry + 1 s,
// is logged); a confirm sent to it once its lease ran out is refused at
// once (self-fencing) and executes nothing; the proposal it was confirming
// ends executed or not executed, never indeterminate, its command never
// started after the lease ran out; and its turns end once, on another
// daemon. Trials move the victim round the three slots.
func TestClusterGrayFrozenBackends(t *testing.T) {
	skipLong(t)
	const trials = 3
	rng := faultSeed(t)
	c := newProxiedCluster(t, postgresServer(t), false, 3,
		append(append([]string{"--model", "script:" + faultScript(t, 2*trials, 40, 100*time.Millisecond), "--workers", "16"}, clusterLease...), faultFlags...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	var reaps, refusals []time.Duration
	metAim := 0
	for i := range trials {
		vi := i % 3
		v := c.d(vi)
		inst, err := c.instanceOf(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		// The victim's own turn in flight, and two proposals parked on
		// the others: one confirmed on the victim now, one later.
		pacedReq := c.pacedTurnsOn(ctx, 1, func(int) int { return vi })[0]
		p1 := c.parkOn(ctx, c.d((vi+1)%3), 2*i)
		p2 := c.parkOn(ctx, c.d((vi+2)%3), 2*i+1)
		sent := time.Now()
		first := confirmAsync(ctx, v, p1)
		time.Sleep(time.Duration(rng.Int64N(int64(50 * time.Millisecond)))) // the fault's moment: right after the confirm
		f, caught, err := c.freezeInside(ctx, vi, `studio_instances`, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		frozenAt := time.Now()
		var owned []string // the victim's turns as it froze
		rows, err := c.pool.Query(ctx, `SELECT request_id FROM studio_operator_turns WHERE owner_instance = $1
			AND status IN ('running', 'awaiting_confirmation')`, inst)
		if err == nil {
			owned, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			f.thaw()
			t.Fatal(err)
		}
		thawAt := frozenAt.Add(3 * leaseExpiry)
		rctx, rcancel := context.WithDeadline(ctx, thawAt)
		rerr := poll(rctx, "the frozen daemon reaped", func(ctx context.Context) (bool, error) { return c.reaped(ctx, inst) })
		rcancel()
		reapTook := time.Since(frozenAt)
		if rerr != nil {
			f.thaw()
			t.Fatalf("trial %d (frozen inside a transaction on its instance: %v): not reaped while its sessions hung (%v):\n%s", i, caught, rerr, c.logTails())
		}
		reaps = append(reaps, reapTook)
		if reapTook <= leaseExpiry+time.Second {
			metAim++
		}
		// Its lease ran out: a confirm it is sent now is refused at once.
		second := confirmAsync(ctx, v, p2)
		var a2 answer
		select {
		case a2 = <-second:
		case <-time.After(time.Until(thawAt)):
			f.thaw()
			t.Fatalf("trial %d: the confirm sent once the frozen daemon's lease ran out was not answered while it stayed frozen", i)
		}
		refusals = append(refusals, a2.took)
		if a2.err == nil || protocol.CodeOf(a2.err) != protocol.ServiceFailure {
			f.thaw()
			t.Fatalf("trial %d: the confirm sent to the frozen daemon after its lease ran out answered %s, want 503 service_failure", i, a2)
		}
		// A confirm of the proposal the frozen daemon confirmed, sent again
		// to another daemon during the takeover: it answers the recorded
		// outcome, or executing while that is not recorded yet.
		var repeat <-chan answer
		var status string
		if err := c.pool.QueryRow(ctx, `SELECT status FROM studio_operator_proposals WHERE id = $1`, p1.id).Scan(&status); err != nil {
			f.thaw()
			t.Fatal(err)
		}
		if status == "executing" {
			repeat = confirmAsync(ctx, c.d((vi+2)%3), p1)
		}
		hold(ctx, thawAt)
		f.thaw()
		var a1 answer
		select {
		case a1 = <-first:
		case <-ctx.Done():
			t.Fatalf("trial %d: the first confirm was never answered", i)
		}
		// Answered within the bound after the freeze, whatever it was
		// doing then.
		if after := sent.Add(a1.took).Sub(frozenAt); !a1.answered() || after > confirmBound+boundSlack {
			t.Errorf("trial %d: the confirm in flight was answered %v after the freeze: over the bound %v (and the slack %v)", i, after, confirmBound, boundSlack)
		}
		if !c.rejoinedOrExited(ctx, v, inst) {
			if _, err := c.restart(vi); err != nil {
				t.Fatal(err)
			}
		}
		healthy := c.d((vi + 1) % 3)
		again := c.finishPending(ctx, healthy, p1) // the victim's confirm was refused before it was recorded
		c.finishPending(ctx, healthy, p2)
		e1, e2 := c.settled(ctx, p1.id), c.settled(ctx, p2.id)
		ids := []string{pacedReq, p1.request, p2.request}
		for _, id := range owned {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		ends := c.waitTurnsEnded(ctx, ids)
		reapCommitted, leaseEnd, err := c.reapedAt(ctx, inst)
		if err != nil {
			t.Fatal(err)
		}
		// Executed at most once, never after the lease ran out: the
		// marker's stamp is when the command's transaction began.
		repeated := "not sent (the proposal was not executing)"
		if repeat != nil {
			ar := <-repeat
			repeated = ar.String()
			if ar.err != nil || (ar.res.Status != protocol.ResultExecuting && string(ar.res.Status) != e1.status) {
				t.Errorf("trial %d: the confirm sent again during the takeover answered %s, but the proposal ended %s", i, ar, e1.status)
			}
		}
		if d := disagreement(a1, e1, ends[p1.request]); d != "" {
			t.Errorf("trial %d: the confirm in flight on the frozen daemon: %s", i, d)
		}
		if !again && e1.executed != nil && time.Unix(0, int64(*e1.executed*1e9)).After(leaseEnd) {
			t.Errorf("trial %d: the frozen daemon's command started %v after its lease ran out", i, time.Unix(0, int64(*e1.executed*1e9)).Sub(leaseEnd))
		}
		for _, id := range owned {
			if after, err := c.endedAfter(ctx, id, reapCommitted); err != nil || !after {
				t.Errorf("trial %d: the frozen daemon's turn %s did not end after its reaping, on another daemon (%v)", i, id, err)
			}
		}
		t.Logf("trial %d: frozen inside a transaction on its instance: %v; reaped %v after the freeze; the confirm in flight answered %s and ended %s%s%s; "+
			"the confirm sent again to another daemon during the takeover answered %s; "+
			"the confirm sent after its lease ran out answered %s (confirmed again elsewhere: %s); its turns %v ended %v",
			i, caught, reapTook.Round(time.Millisecond), a1, e1.status+map[bool]string{true: " (confirmed again elsewhere)"}[again], codeSuffix(e1.code), readBackSuffix(e1.readBack),
			repeated, a2, e2.status, owned, outcomeCounts(ends))
		c.checkTrial(ctx, i)
	}
	t.Logf("%d trials: freeze to reaping %s (%d of %d within expiry + 1 s = %v); refusal of a confirm after the lease ran out %s",
		trials, spread(reaps), metAim, trials, leaseExpiry+time.Second, spread(refusals))
}

func codeSuffix(code string) string {
	if code == "" {
		return ""
	}
	return " (" + code + ")"
}

func readBackSuffix(b bool) string {
	if b {
		return ", its result read back by the takeover"
	}
	return ""
}

// checkTrial checks the database after trial i: every command ran at
// most once and was audited, none is indeterminate or left executing; it
// stops the test when the trial failed.
func (c *faultCluster) checkTrial(ctx context.Context, i int) {
	c.t.Helper()
	t := c.t
	rep, err := c.checkLaunches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.violations {
		t.Errorf("trial %d: %s", i, v)
	}
	if audits, executing, err := c.indeterminates(ctx); err != nil || audits != 0 || executing != 0 {
		t.Errorf("trial %d: %d indeterminate audit rows, %d proposals left executing (%v)", i, audits, executing, err)
	}
	if t.Failed() {
		t.Fatalf("stopping after trial %d:\n%s", i, c.logTails())
	}
}

// disagreement says how a confirm's answer and the way its proposal and
// turn ended disagree, or "": an outcome answered is the proposal's, and
// a confirm answered succeeded is followed by its turn going on to its
// end, not failed by a takeover (one action, one outcome).
func disagreement(a answer, e proposalEnd, end turnEnd) string {
	if a.err != nil || a.res.Status == protocol.ResultExecuting {
		return "" // no outcome was answered
	}
	if string(a.res.Status) != e.status {
		return fmt.Sprintf("the confirm answered %s but the proposal ended %s", a, e.status)
	}
	if a.res.Status == protocol.ResultSucceeded && end.status != "completed" {
		return fmt.Sprintf("the confirm answered %s but its turn ended %s%s", a, end.status, codeSuffix(end.code))
	}
	return ""
}

// TestClusterGrayDroppedConnections: one daemon's link to the database
// stops forwarding (a stuck proxy: every connection stays open, no byte
// passes, nothing fails) for 4 × the lease expiry, with a confirm in
// flight on it and more sent to it as the link stays dead. Every confirm
// is answered, while the link is still dead, within the documented bound
// (the lease expiry plus one call's deadline), none with 409 while its
// proposal stays pending; the
// daemon is reaped; and each proposal ends executed or not executed (or
// is confirmed again elsewhere), never indeterminate, each turn ending
// once.
func TestClusterGrayDroppedConnections(t *testing.T) {
	skipLong(t)
	const trials, later = 2, 3
	rng := faultSeed(t)
	c := newProxiedCluster(t, postgresServer(t), false, 3,
		append(append([]string{"--model", "script:" + faultScript(t, trials*(1+later), 0, 0), "--workers", "16"}, clusterLease...), faultFlags...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	var took []time.Duration
	n := 0
	for i := range trials {
		vi := i % 3
		v := c.d(vi)
		inst, err := c.instanceOf(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		var ps []parked
		for range 1 + later {
			ps = append(ps, c.parkOn(ctx, c.d((vi+1+n%2)%3), n))
			n++
		}
		answers := make([]<-chan answer, len(ps))
		answers[0] = confirmAsync(ctx, v, ps[0])
		time.Sleep(time.Duration(rng.Int64N(int64(30 * time.Millisecond)))) // the fault's moment: right after the confirm
		c.proxies[vi].stop()
		droppedAt := time.Now()
		// More confirms as the link stays dead: before the lease runs
		// out, about when it does, and long after.
		for k, at := range []time.Duration{300 * time.Millisecond, leaseExpiry, 2 * leaseExpiry} {
			hold(ctx, droppedAt.Add(at))
			answers[1+k] = confirmAsync(ctx, v, ps[1+k])
		}
		hold(ctx, droppedAt.Add(4*leaseExpiry))
		c.proxies[vi].resume()
		got := make([]answer, len(ps))
		for k, ch := range answers {
			select {
			case got[k] = <-ch:
			case <-ctx.Done():
				t.Fatalf("trial %d: confirm %d was never answered", i, k)
			}
			took = append(took, got[k].took)
			if !got[k].answered() || got[k].took > confirmBound+boundSlack {
				t.Errorf("trial %d: confirm %d answered %s: no answer within the bound %v (and the slack %v)", i, k, got[k], confirmBound, boundSlack)
			}
		}
		reaped, err := c.reaped(ctx, inst)
		if err != nil {
			t.Fatal(err)
		}
		if !c.rejoinedOrExited(ctx, v, inst) {
			if _, err := c.restart(vi); err != nil {
				t.Fatal(err)
			}
		}
		healthy := c.d((vi + 1) % 3)
		var reqs, ended []string
		var es []proposalEnd
		for k, p := range ps {
			var status string
			if err := c.pool.QueryRow(ctx, `SELECT status FROM studio_operator_proposals WHERE id = $1`, p.id).Scan(&status); err != nil {
				t.Fatal(err)
			}
			if protocol.IsCode(got[k].err, protocol.Conflict) && status == "pending" {
				t.Errorf("trial %d: confirm %d answered %s while its proposal stayed pending", i, k, got[k])
			}
			c.finishPending(ctx, healthy, p)
			e := c.settled(ctx, p.id)
			es = append(es, e)
			reqs = append(reqs, p.request)
			ended = append(ended, e.status+codeSuffix(e.code)+readBackSuffix(e.readBack))
		}
		ends := c.waitTurnsEnded(ctx, reqs)
		var said []string
		for k := range got {
			said = append(said, got[k].String())
			if d := disagreement(got[k], es[k], ends[ps[k].request]); d != "" {
				t.Errorf("trial %d: confirm %d: %s", i, k, d)
			}
		}
		t.Logf("trial %d: reaped %v; confirms answered %s; proposals ended %s; turns %v", i, reaped, strings.Join(said, "; "),
			strings.Join(ended, ", "), outcomeCounts(ends))
		c.checkTrial(ctx, i)
	}
	t.Logf("%d confirms on a daemon whose link stopped: answered in %s (bound %v)", len(took), spread(took), confirmBound)
}

// TestClusterGrayTakeoverOfExecutedProposal: the daemon executing a
// confirmed command is paused (SIGSTOP) inside the transaction that
// records its result, after the command's own transaction committed —
// caught there by its pause point (STUDIO_PAUSE_AT, pause_unix.go), where
// it waits to be stopped; its lease expires. Resumed, it answers the
// confirm it was serving (typed) before it rejoins. The daemon that takes its
// work over reads the command's marker and records the proposal executed,
// its result read back from what the command wrote: no indeterminate, no
// reconcile, one run; the turn goes on there and ends once.
func TestClusterGrayTakeoverOfExecutedProposal(t *testing.T) {
	skipLong(t)
	const trials = 2
	// Each daemon process stops at its first recording of an outcome.
	t.Setenv(pauseVariable, coordinator.PauseRecordOutcome)
	c := newFaultCluster(t, postgresServer(t), false, 3,
		append(append([]string{"--model", "script:" + faultScript(t, trials, 0, 0), "--workers", "16"}, clusterLease...), faultFlags...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	for i := range trials {
		ci := i % 3 // a new process each trial: it has not paused yet
		confirmer := c.d(ci)
		p := c.parkOn(ctx, c.d((ci+1)%3), i)
		inst, err := c.instanceOf(ctx, confirmer)
		if err != nil {
			t.Fatal(err)
		}
		ans := confirmAsync(ctx, confirmer, p)
		// At its pause point, inside the transaction that records the
		// outcome: the command's own committed before it.
		c.waitUntil(ctx, "the confirmer at its pause point", func(context.Context) (bool, error) {
			return strings.Contains(confirmer.Logs(), "paused at a test's pause point"), nil
		})
		confirmer.pause()
		paused := time.Now()
		var status string
		var executed *float64
		if err := c.pool.QueryRow(ctx, `SELECT status, executed_at FROM studio_operator_proposals WHERE id = $1`, p.id).Scan(&status, &executed); err != nil {
			t.Fatal(err)
		}
		if status != "executing" || executed == nil {
			t.Fatalf("trial %d: paused inside the recording, the proposal is %s (executed at %v), want executing, its marker set", i, status, executed)
		}
		c.waitUntil(ctx, "the paused daemon reaped", func(ctx context.Context) (bool, error) { return c.reaped(ctx, inst) })
		e := c.settled(ctx, p.id)
		recorded := time.Since(paused)
		confirmer.resume()
		resumed := time.Now()
		a := <-ans
		// Resumed, it learns its lease is gone; the confirm it was serving
		// is answered (typed) before the process replaces itself, not cut.
		if a.err != nil && protocol.CodeOf(a.err) == "" {
			t.Errorf("trial %d: the paused daemon's confirm got no typed answer after it resumed: %v", i, a.err)
		} else if waited := time.Since(resumed); waited > rejoinDrain+boundSlack {
			t.Errorf("trial %d: the paused daemon's confirm answered %v after it resumed, bound %v", i, waited.Round(time.Millisecond), rejoinDrain+boundSlack)
		}
		if !c.rejoinedOrExited(ctx, confirmer, inst) {
			if _, err := c.restart(ci); err != nil {
				t.Fatal(err)
			}
		}
		ends := c.waitTurnsEnded(ctx, []string{p.request})
		decisions := c.auditDecisions(ctx, p.id)
		var runs int
		if err := c.pool.QueryRow(ctx, `SELECT COUNT(*) FROM studio_runs WHERE input = $1`, runInput(i)).Scan(&runs); err != nil {
			t.Fatal(err)
		}
		t.Logf("trial %d: paused inside the recording; recorded %s%s %v after the pause; the paused daemon's confirm answered %s; turn %v",
			i, e.status, readBackSuffix(e.readBack), recorded.Round(time.Millisecond), a, outcomeCounts(ends))
		if e.status != "succeeded" || !e.readBack || e.executed == nil || decisions["executed"] != 1 || decisions["indeterminate"] != 0 || runs != 1 {
			t.Errorf("trial %d: proposal %s%s (read back %v, executed at %v), decisions %v, %d runs; want succeeded, read back, one executed row, one run",
				i, e.status, codeSuffix(e.code), e.readBack, e.executed, decisions, runs)
		}
		if end := ends[p.request]; end.status != "completed" {
			t.Errorf("trial %d: the taken-over turn ended %s, want completed (it goes on after the takeover)", i, end.status)
		}
		if d := disagreement(a, e, ends[p.request]); d != "" {
			t.Errorf("trial %d: the paused daemon's confirm: %s", i, d)
		}
		if t.Failed() {
			t.Fatalf("stopping after trial %d:\n%s", i, c.logTails())
		}
	}
	if audits, executing, err := c.indeterminates(ctx); err != nil || audits != 0 || executing != 0 {
		t.Errorf("%d indeterminate audit rows, %d proposals left executing (%v)", audits, executing, err)
	}
}

// auditDecisions counts a proposal's audit rows by decision.
func (c *faultCluster) auditDecisions(ctx context.Context, proposalID string) map[string]int {
	c.t.Helper()
	rows, err := c.pool.Query(ctx, `SELECT details::jsonb->>'decision' FROM admin_events WHERE target_id = $1 AND action = 'studio.operator.command'`, proposalID)
	if err != nil {
		c.t.Fatal(err)
	}
	ds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range ds {
		out[d]++
	}
	return out
}
