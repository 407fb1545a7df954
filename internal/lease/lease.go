// Package lease keeps a daemon's instance in StateDB: it registers the
// instance, renews its lease every Renew, and — when several daemons
// share the database — runs the reaper on every daemon. A reaper marks
// the instances whose lease expired as reaped (a compare-and-set against
// their renewal, so an instance is never both renewed and reaped; rows a
// paused daemon holds locked are passed over until the next look) and
// hands what they still own to the Reapers of the turn engine and the
// application, which end it exactly once across daemons.
//
// A reaper reaps only after its own daemon has seen the database without
// a break for a whole Expiry: after an outage of the database every lease
// looks expired, and the others must have had the time to renew theirs.
//
// A daemon whose renewal finds itself reaped has lost its lease: another
// daemon ended or took over its work, and its writes are fenced off
// (store.Fence). Lost closes, and the daemon must stop working (studio
// serve rejoins as a new instance, or exits for its supervisor).
//
// Before that, a daemon whose renewals fail cannot prove its lease once
// the last one granted runs out (Held, against the local clock from
// before that renewal was sent): it fences itself (the coordinator
// decides, claims and executes nothing; /readyz and the streams say so,
// Changed) until a renewal succeeds again. The reaping itself waits on no
// lock the daemon's sessions may hold (store.InstanceStore.ReapInstances),
// so a daemon whose connections hang is reaped at Expiry like a dead one.
//
// How long a dead daemon's work waits: its last renewal gave it a lease
// until at most Expiry after its death, and the other daemons' reapers
// look every Renew, so its turns end within Expiry + Renew (plus the time
// to write their ends). The daemons' clocks must agree to well within
// Expiry (NTP), since each compares its own clock with the lease another
// wrote.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Defaults of the lease flags.
const (
	DefaultRenew  = 2 * time.Second
	DefaultExpiry = 10 * time.Second
	// DefaultPurgeAfter is how long a stopped or reaped instance stays
	// listed (doctor shows recent deaths).
	DefaultPurgeAfter = 24 * time.Hour
)

// Reaper ends the work of reaped instances that its package owns.
type Reaper interface {
	ReapOrphans(ctx context.Context, w store.OrphanedWork) error
}

// Config configures a Keeper.
type Config struct {
	Store store.InstanceStore
	// Instance is this daemon: ID, Address, PID and Version; Start sets
	// the times.
	Instance store.Instance
	Renew    time.Duration
	Expiry   time.Duration
	// Reap runs the reaper: set when several daemons share the database.
	// Unset, the lease is only renewed (doctor shows it) and the daemon's
	// start-up recovery ended earlier processes' work.
	Reap bool
	// Reapers end the orphaned work (the coordinator's turns, the
	// application's runs).
	Reapers    []Reaper
	PurgeAfter time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Stats are the keeper's counters, for /metrics.
type Stats struct {
	Renewals      int64 // leases renewed
	RenewFailures int64 // renewals the store refused or could not answer
	Reaped        int64 // instances this daemon's reaper reaped
	Instances     int   // live instances at the last look (this one included)
}

// Keeper keeps one instance's lease.
type Keeper struct {
	cfg  Config
	st   store.InstanceStore
	log  *slog.Logger
	now  func() time.Time
	stop chan struct{}
	done chan struct{}

	renewals, failures, reaped atomic.Int64
	live                       atomic.Int64
	expires                    atomic.Int64 // the lease's end as last granted, Unix nanoseconds

	// healthy is when this daemon's renewals began to succeed without a
	// break (0: they fail now). Its reaper reaps only once
	// that is a whole Expiry ago: after an outage of the database every
	// lease looks expired, and the others must have had the time to renew
	// theirs before anyone takes their work.
	healthy atomic.Int64 // healthySince in Unix nanoseconds, 0 for none: the reaper's loop reads it
	// reapNow asks the reaper's loop for a look: after each renewal that
	// succeeded, once healthy. The reaper runs beside the renewals, never
	// in their way: a takeover that waits on a stalled daemon's locks
	// must not let this daemon's own lease run out.
	reapNow chan struct{}

	looks int // reaper's looks so far (its loop's alone): old instances are purged now and then

	lostOnce sync.Once
	lost     chan struct{}
	lostErr  error
	stopOnce sync.Once

	// changed wakes the watchers of Held (Changed) when it changes;
	// wasHeld is what it said at the last look (the run loop's alone).
	changed store.Signals
	wasHeld bool
}

// Start registers the instance with a fresh lease, reaps once (a daemon
// restarted after a crash finds its own previous instance), and renews the
// lease until Stop.
func Start(ctx context.Context, cfg Config) (*Keeper, error) {
	if cfg.Renew <= 0 {
		cfg.Renew = DefaultRenew
	}
	if cfg.Expiry <= 0 {
		cfg.Expiry = DefaultExpiry
	}
	if cfg.Expiry <= cfg.Renew {
		return nil, fmt.Errorf("the lease expiry (%s) must be longer than its renewal interval (%s)", cfg.Expiry, cfg.Renew)
	}
	if cfg.PurgeAfter <= 0 {
		cfg.PurgeAfter = DefaultPurgeAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	k := &Keeper{cfg: cfg, st: cfg.Store, log: cfg.Logger, now: cfg.Now,
		stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{}), reapNow: make(chan struct{}, 1)}
	now := k.now()
	in := cfg.Instance
	in.StartedAt, in.HeartbeatAt, in.LeaseExpiresAt = now, now, now.Add(cfg.Expiry)
	if _, err := k.st.RegisterInstance(ctx, store.RegisterInstanceParams{Instance: in}); err != nil {
		return nil, fmt.Errorf("register instance: %w", err)
	}
	k.live.Store(1)
	k.healthy.Store(now.UnixNano())
	k.wasHeld = true
	k.expires.Store(in.LeaseExpiresAt.UnixNano())
	k.log.Info("instance registered", "instance", in.ID, "lease_renew", cfg.Renew, "lease_expiry", cfg.Expiry)
	reaped := make(chan struct{})
	go k.reapLoop(reaped)
	go k.run(reaped)
	return k, nil
}

// ID is this daemon's instance.
func (k *Keeper) ID() string { return k.cfg.Instance.ID }

// Lost closes when the lease was lost: the daemon must stop working.
func (k *Keeper) Lost() <-chan struct{} { return k.lost }

// Err says why the lease was lost (nil while it holds).
func (k *Keeper) Err() error {
	select {
	case <-k.lost:
		return k.lostErr
	default:
		return nil
	}
}

// Held says whether this daemon holds its lease at now: not lost, not
// stopped, and renewed recently enough that it has not run out (renewals
// failing for longer than the expiry let another daemon's reaper take the
// work). The error says why not.
func (k *Keeper) Held(now time.Time) error {
	if err := k.Err(); err != nil {
		return err
	}
	select {
	case <-k.stop:
		return errors.New("lease ended: the daemon is stopping")
	default:
	}
	if exp := time.Unix(0, k.expires.Load()); !now.Before(exp) {
		return fmt.Errorf("lease ran out at %s: %d renewals failed", exp.UTC().Format(time.RFC3339), k.failures.Load())
	}
	return nil
}

// Changed returns a channel closed at the next change of Held: the lease
// could no longer be proven, or was renewed again. Take it before asking
// Held; changes are seen at the renewal ticks, a Renew apart at most.
func (k *Keeper) Changed() <-chan struct{} { return k.changed.Wait("") }

// look tells the watchers of Held when it changed since the last look.
func (k *Keeper) look() {
	held := k.Held(k.now()) == nil
	if held == k.wasHeld {
		return
	}
	k.wasHeld = held
	if !held {
		k.log.Warn("this daemon cannot prove its lease: it decides, claims and executes nothing until it renews",
			"instance", k.ID(), "failures", k.failures.Load())
	} else {
		k.log.Info("lease renewed again: this daemon decides, claims and executes again", "instance", k.ID())
	}
	k.changed.Notify("")
}

// Stats returns the counters.
func (k *Keeper) Stats() Stats {
	return Stats{Renewals: k.renewals.Load(), RenewFailures: k.failures.Load(), Reaped: k.reaped.Load(),
		Instances: int(k.live.Load())}
}

// Stop stops renewing and ends the lease at once (a clean shutdown): the
// other daemons' reapers take over anything this daemon still owns on
// their next look. Call it after the turn engine and the application
// stopped.
func (k *Keeper) Stop(ctx context.Context) error {
	k.stopOnce.Do(func() { close(k.stop) })
	<-k.done
	if k.Err() != nil {
		return nil // reaped: nothing of ours is left to stop
	}
	return k.st.StopInstance(ctx, store.StopInstanceParams{ID: k.ID(), Now: k.now()})
}

// run renews the lease every Renew until Stop or the lease is lost, and
// asks the reaper's loop for a look after each renewal once healthy; it
// closes done when the reaper's loop ended too.
func (k *Keeper) run(reaperDone <-chan struct{}) {
	defer close(k.done)
	defer func() { <-reaperDone }()
	defer close(k.reapNow)
	defer k.changed.Notify("") // stopped or lost: Held says so now
	t := time.NewTicker(k.cfg.Renew)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		k.look() // expired since the last renewal?
		// The renewal, and the reaper's look, each get their own
		// deadline: a takeover cut short by the renewal's would leave its
		// outcome unknown.
		ctx, cancel := context.WithTimeout(context.Background(), k.renewTimeout())
		err := k.renew(ctx)
		cancel()
		if errors.Is(err, errLost) {
			return
		}
		k.look()
		now := k.now()
		if err != nil {
			k.healthy.Store(0)
			continue
		}
		if k.healthy.Load() == 0 {
			k.healthy.Store(now.UnixNano())
			k.log.Info("the database answers again; reaping waits a whole lease expiry", "instance", k.ID(), "lease_expiry", k.cfg.Expiry)
		}
		select {
		case k.reapNow <- struct{}{}:
		default: // the reaper is still at its last look
		}
	}
}

// reapLoop reaps (when healthy long enough and Config.Reap) and purges,
// one look per ask of run, until run closes reapNow.
func (k *Keeper) reapLoop(done chan<- struct{}) {
	defer close(done)
	for range k.reapNow {
		ctx, cancel := context.WithTimeout(context.Background(), k.reapTimeout())
		if k.cfg.Reap && k.healthyFor() >= k.cfg.Expiry {
			k.reap(ctx)
		}
		k.purge(ctx)
		cancel()
	}
}

// healthyFor is how long the renewals have succeeded without a break.
func (k *Keeper) healthyFor() time.Duration {
	since := k.healthy.Load()
	if since == 0 {
		return 0
	}
	return k.now().Sub(time.Unix(0, since))
}

var errLost = errors.New("lease lost")

// renewTimeout bounds one renewal: long enough for a loaded database,
// short enough to try again well before the lease expires.
func (k *Keeper) renewTimeout() time.Duration { return max(k.cfg.Renew, k.cfg.Expiry/4) }

// reapTimeout bounds one look of the reaper, takeovers included.
func (k *Keeper) reapTimeout() time.Duration { return max(k.cfg.Expiry, 10*time.Second) }

// renew extends the lease; a refusal because the instance was reaped
// closes Lost.
func (k *Keeper) renew(ctx context.Context) error {
	now := k.now()
	_, err := k.st.RenewLease(ctx, store.RenewLeaseParams{ID: k.ID(), Now: now, ExpiresAt: now.Add(k.cfg.Expiry)})
	switch {
	case err == nil:
		k.renewals.Add(1)
		k.expires.Store(now.Add(k.cfg.Expiry).UnixNano())
		return nil
	case protocol.IsCode(err, protocol.Conflict):
		k.failures.Add(1)
		k.lostOnce.Do(func() {
			k.lostErr = fmt.Errorf("%w: %v", errLost, err)
			k.log.Error("lease lost: another daemon took this daemon's work over; stopping", "instance", k.ID(), "err", err)
			close(k.lost)
		})
		return errLost
	}
	n := k.failures.Add(1)
	k.log.Warn("lease renewal failed; retrying", "instance", k.ID(), "failures", n, "err", err)
	return err
}

// purge deletes, about once a minute, the instances that stopped or were
// reaped longer than PurgeAfter ago and own nothing: doctor lists recent
// ones, and a daemon alone with its SQLite file adds one at every start.
func (k *Keeper) purge(ctx context.Context) {
	k.looks++
	if k.looks%max(1, int(time.Minute/k.cfg.Renew)) != 1 {
		return
	}
	if _, err := k.st.PurgeInstances(ctx, store.PurgeInstancesParams{Before: k.now().Add(-k.cfg.PurgeAfter)}); err != nil {
		k.log.Warn("purge old instances", "err", err)
	}
}

// reap marks expired instances reaped and hands the orphaned work to the
// reapers; failures are logged and the next look tries again.
func (k *Keeper) reap(ctx context.Context) {
	now := k.now()
	gone, err := k.st.ReapInstances(ctx, store.ReapInstancesParams{Now: now, Except: k.ID()})
	if err != nil {
		k.log.Warn("reap expired instances", "err", err)
		return
	}
	for _, in := range gone {
		k.reaped.Add(1)
		k.log.Warn("a daemon's lease expired: taking its work over", "instance", in.ID, "address", in.Address, "pid", in.PID,
			"heartbeat_at", in.HeartbeatAt, "lease_expired_at", in.LeaseExpiresAt)
	}
	w, err := k.st.OrphanedWork(ctx, store.OrphanedWorkParams{Limit: 100})
	if err != nil {
		k.log.Warn("list orphaned work", "err", err)
		return
	}
	// Every look, with or without orphans: a reaper also reads again the
	// takeovers whose outcome it could not learn.
	for _, r := range k.cfg.Reapers {
		if err := r.ReapOrphans(ctx, w); err != nil {
			k.log.Warn("end orphaned work", "err", err)
		}
	}
	if all, err := k.st.ListInstances(ctx, store.ListInstancesParams{Limit: 1000}); err == nil {
		live := 0
		for _, in := range all {
			if in.State(now) == store.InstanceLive {
				live++
			}
		}
		k.live.Store(int64(live))
	}
}
