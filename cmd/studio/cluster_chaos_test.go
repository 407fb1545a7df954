package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/postgres/pgtest"
)

// chaosDuration is how long the randomised fault schedule runs:
// STUDIO_CHAOS_DURATION (a Go duration), else 90 s.
func chaosDuration(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("STUDIO_CHAOS_DURATION")
	if s == "" {
		return 90 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("STUDIO_CHAOS_DURATION=%q: want a positive Go duration such as 5m", s)
	}
	return d
}

// tally counts outcomes by name, from many goroutines.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (t *tally) add(k string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]int{}
	}
	t.m[k]++
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, t.m[k])
	}
	return "{" + b.String() + "}"
}

// answerKind names a confirm's or deny's answer for the tallies.
func answerKind(res protocol.ProposalResult, err error) string {
	switch {
	case err != nil:
		if code := protocol.CodeOf(err); code != "" {
			return "error " + string(code)
		}
		return "no answer"
	case res.Error != nil:
		return string(res.Status) + " (" + string(res.Error.Code) + ")"
	}
	return string(res.Status)
}

// TestClusterChaosFaultSchedule: three daemons on a PostgreSQL server of
// the test's own, with turns, proposals, confirms and denials submitted
// all along, under a random schedule of faults — a daemon paused (at a
// random instant or inside a transaction) for up to twice the lease
// expiry, a daemon killed (SIGKILL) and started again, PostgreSQL
// restarted (fast) or stopped for a moment, and the gray ones: every
// database session of a daemon frozen with what it holds (SIGSTOP of its
// server processes, its link stopped) past the lease expiry, or its link
// to the database stopped (a proxy that stops forwarding) — for STUDIO_CHAOS_DURATION
// (90 s by default). Then, with the faults over and every open proposal's
// turn cancelled, the database must show: every turn ended with exactly
// one done frame; each confirmed command ran at most once and never after
// its indeterminate audit row; every execution audited; no proposal left
// indeterminate or executing (the execution marker decides every
// takeover); and no daemon exited on its own (a daemon that lost its
// lease rejoins). The seed is
// logged; STUDIO_CHAOS_SEED replays the same choices (not the same
// timing). The outcome counts are logged, for the benchmark report.
func TestClusterChaosFaultSchedule(t *testing.T) {
	skipLong(t)
	duration := chaosDuration(t)
	rng := faultSeed(t)
	const launches, clients = 1000, 6
	srv := pgtest.New(t)
	c := newProxiedCluster(t, srv, true, 3,
		append(append([]string{"--model", "script:" + faultScript(t, launches, 20, 100*time.Millisecond), "--workers", "32"},
			clusterLease...), faultFlags...)...)
	ctx, cancel := context.WithTimeout(t.Context(), duration+6*time.Minute)
	defer cancel()
	t.Logf("fault schedule for %v (STUDIO_CHAOS_DURATION)", duration)

	var faults, requests, answers tally
	var launched atomic.Int64
	var selfExits atomic.Int64
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Clients: each its own random stream, derived from the seed.
	for range clients {
		r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Go(func() {
			for load.Err() == nil {
				chaosClientStep(load, c, r, launches, &launched, &requests, &answers)
				// A client's pace, so that six keep a two-core machine busy
				// but not saturated (and a refused request is not retried
				// in a tight loop).
				select {
				case <-time.After(time.Duration(50+r.IntN(250)) * time.Millisecond):
				case <-load.Done():
				}
			}
		})
	}
	// The fault schedule: one fault at a time, every 0.5–3 s.
	fr := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	wg.Go(func() {
		defer stopLoad()
		end := time.Now().Add(duration)
		for time.Now().Before(end) && ctx.Err() == nil {
			select {
			case <-time.After(time.Duration(500+fr.IntN(2500)) * time.Millisecond):
			case <-ctx.Done():
				return
			}
			kind, err := chaosFault(ctx, c, srv, fr, &selfExits)
			faults.add(kind)
			if err != nil {
				t.Errorf("fault %s: %v", kind, err)
				return
			}
		}
	})
	wg.Wait()

	// Settle: everything continued and running, database up.
	if err := srv.StartAgain(); err != nil {
		t.Fatal(err)
	}
	for i, d := range c.daemons() {
		d.resume()
		if !waitRunning(ctx, d) {
			selfExits.Add(1)
			t.Logf("daemon %d exited on its own:\n%s", i, tail(d.Logs(), 3000))
			if _, err := c.restart(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Turns still waiting for a human are cancelled, so every turn ends.
	// The sweep goes on until no turn is open at all: a turn still queued
	// behind the faults (or still talking to the model) parks only later.
	cancelled := 0
	c.waitUntil(ctx, "every turn ended or its parked turn cancelled", func(ctx context.Context) (bool, error) {
		rows, err := c.pool.Query(ctx, `SELECT conversation_id, request_id, status FROM studio_operator_turns
			WHERE status NOT IN ('completed', 'failed', 'cancelled')`)
		if err != nil {
			return false, err
		}
		var parked [][2]string
		open := 0
		for rows.Next() {
			var conv, req, status string
			if err := rows.Scan(&conv, &req, &status); err != nil {
				rows.Close()
				return false, err
			}
			open++
			if status == "awaiting_confirmation" {
				parked = append(parked, [2]string{conv, req})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return false, err
		}
		for _, o := range parked {
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			_, err := c.d(cancelled%3).client.Cancel(rctx, o[0], o[1])
			cancel()
			if err == nil {
				cancelled++
			}
		}
		return open == 0, nil
	})
	settle, cancelSettle := context.WithTimeout(ctx, 3*time.Minute)
	ends := c.waitTurnsEnded(settle, nil)
	cancelSettle()
	rep, err := c.checkLaunches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.violations {
		t.Error(v)
	}
	if n := selfExits.Load(); n > 0 {
		t.Errorf("daemons exited on their own %d times (a daemon that loses its lease must rejoin, not exit)", n)
	}
	// Every proposal's outcome is known: the execution marker decides
	// each takeover, so none is left indeterminate or executing.
	audits, executing, err := c.indeterminates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if audits != 0 || executing != 0 {
		t.Errorf("%d indeterminate audit rows and %d proposals left executing, want none: the marker decides every takeover", audits, executing)
	}
	var readBack, notExecuted int
	if err := c.pool.QueryRow(ctx, `SELECT COUNT(*) FILTER (WHERE result_json::jsonb->>'readBack' = 'true'), COUNT(*) FILTER (WHERE error_code = 'not_executed')
		FROM studio_operator_proposals`).Scan(&readBack, &notExecuted); err != nil {
		t.Fatal(err)
	}
	t.Logf("faults injected: %s", faults.String())
	t.Logf("requests: %s", requests.String())
	t.Logf("confirm and deny answers: %s", answers.String())
	t.Logf("turns: %d, %v (%d parked turns cancelled at the end)", len(ends), outcomeCounts(ends), cancelled)
	t.Logf("launch proposals: %d, by status %v; audit decisions %v; runs created %d", rep.proposals, rep.byStatus, rep.decisions, rep.runs)
	t.Logf("recorded by a takeover from the execution marker: %d executed (read back), %d not executed", readBack, notExecuted)
	if t.Failed() {
		t.Log(c.logTails())
	}
}

// chaosClientStep is one client action on a random daemon: a paced turn,
// a quick turn, or a launch proposal that is then confirmed (on one or
// two daemons at once) or denied. Every request has a deadline: a paused
// daemon does not answer.
func chaosClientStep(ctx context.Context, c *faultCluster, r *rand.Rand, launches int, launched *atomic.Int64, requests, answers *tally) {
	d := c.d(r.IntN(3))
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	switch x := r.IntN(10); {
	case x < 3:
		_, _, err := startTurn(rctx, d, "zqpaced")
		requests.add(outcomeOf("paced turn", err))
	case x < 5:
		_, _, err := startTurn(rctx, d, "hello")
		requests.add(outcomeOf("quick turn", err))
	default:
		n := int(launched.Add(1)) - 1
		if n >= launches {
			return
		}
		conv, req, err := startTurn(rctx, d, launchWord(n))
		requests.add(outcomeOf("launch turn", err))
		if err != nil {
			return
		}
		p, err := c.parkedProposal(rctx, conv, req)
		if err != nil {
			requests.add("launch turn never parked in time")
			return
		}
		if r.IntN(10) == 0 {
			res, err := d.client.Deny(rctx, p.conv, p.id)
			answers.add("deny: " + answerKind(res, err))
			return
		}
		deciders := []*daemon{c.d(r.IntN(3))}
		if r.IntN(3) == 0 { // a concurrent confirm on another daemon
			deciders = append(deciders, c.d(r.IntN(3)))
		}
		var wg sync.WaitGroup
		for _, dd := range deciders {
			wg.Go(func() {
				res, err := confirm(rctx, dd, p)
				answers.add("confirm: " + answerKind(res, err))
			})
		}
		wg.Wait()
	}
}

func outcomeOf(what string, err error) string {
	if err == nil {
		return what + " accepted"
	}
	if code := protocol.CodeOf(err); code != "" {
		return what + " refused " + string(code)
	}
	return what + " unanswered"
}

// chaosFault injects one random fault and undoes it, and says which.
func chaosFault(ctx context.Context, c *faultCluster, srv *pgtest.Server, r *rand.Rand, selfExits *atomic.Int64) (string, error) {
	slot := r.IntN(3)
	d := c.d(slot)
	hold := func(dur time.Duration) {
		select {
		case <-time.After(dur):
		case <-ctx.Done():
		}
	}
	// afterPause continues d and waits until it answers; a daemon that
	// exited on its own is counted and started again.
	afterPause := func() error {
		d.resume()
		if waitRunning(ctx, d) {
			return nil
		}
		selfExits.Add(1)
		_, err := c.restart(slot)
		return err
	}
	switch x := r.IntN(16); {
	case x < 4: // a pause at a random instant, shorter or longer than the expiry
		d.pause()
		hold(time.Duration(r.Int64N(int64(2 * leaseExpiry))))
		return "pause", afterPause()
	case x < 6: // a pause inside a transaction, past the expiry
		caught, err := c.pauseInside(ctx, d, `.`, 2*time.Second)
		if err != nil {
			d.resume()
			return "pause inside a transaction", err
		}
		if !caught {
			d.pause()
		}
		hold(leaseExpiry + time.Duration(r.Int64N(int64(leaseExpiry))))
		kind := "pause inside a transaction"
		if !caught {
			kind = "pause (no transaction caught)"
		}
		return kind, afterPause()
	case x < 9:
		_, err := c.restart(slot) // kills it first
		return "kill -9 and start again", err
	case x < 11:
		return "database restart (fast)", srv.Restart()
	case x < 12: // a short outage, under the lease expiry
		srv.Shutdown()
		hold(time.Duration(r.Int64N(int64(leaseExpiry))))
		return "database stopped and started", srv.StartAgain()
	case x < 14: // gray: every session of the daemon frozen with what it holds, past the expiry
		f, err := c.freeze(ctx, slot)
		if err != nil {
			return "backends frozen", err
		}
		hold(leaseExpiry + time.Duration(r.Int64N(int64(leaseExpiry))))
		f.thaw()
		return "backends frozen", afterPause()
	default: // gray: the daemon's link to the database stops forwarding, shorter or longer than the expiry
		c.proxies[slot].stop()
		hold(time.Duration(r.Int64N(int64(2 * leaseExpiry))))
		c.proxies[slot].resume()
		return "connections dropped", afterPause()
	}
}

// tail is the end of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
