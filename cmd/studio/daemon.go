package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/agui"
	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/datadir"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/lease"
	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/tools"
	"github.com/studio/operator/internal/turnstats"
	"github.com/studio/operator/internal/webhooks"
	"github.com/studio/operator/web"
)

// daemonParts is what `studio serve` builds, field by field in the order serve
// builds them: each step reads the fields of the steps before it.
type daemonParts struct {
	cfg *config
	log *slog.Logger
	o   serveOptions

	lock   *datadir.Lock // the data directory's (SQLite: one daemon per file)
	token  string
	build  metrics.Build
	reg    *metrics.Registry
	models []coordinator.Model // the default first

	st       database
	version  int             // StateDB's schema version
	edge     httpapi.Config  // the main listener's, filled in step by step
	instance string          // this daemon's id in the lease table
	shared   bool            // several daemons share the database (PostgreSQL)
	svc      *studio.Service // playbooks, runs, schedules, workflows
	recent   *turnstats.Ring // the System space's charts
	coord    *coordinator.Coordinator
	ln       net.Listener
	keeper   *lease.Keeper
	api      *httpapi.Server
	srv      *http.Server
	errc     chan error // a listener that failed

	// undo is what the steps started that serve stops on return, in
	// reverse.
	undo []func()
}

// cleanup runs the undo steps, the last one first.
func (d *daemonParts) cleanup() {
	for i := len(d.undo) - 1; i >= 0; i-- {
		d.undo[i]()
	}
}

// claimDataDir takes the data directory (its lock, for SQLite) and the
// owner's token in it.
func (d *daemonParts) claimDataDir() error {
	lock, err := lockDataDir(d.cfg)
	if err != nil {
		return err
	}
	d.lock = lock
	d.undo = append(d.undo, func() { lock.Release() })
	d.token, err = loadOrCreateToken(d.cfg.dataDir)
	redact.AddKnown(d.token) // whatever its shape, it is hidden wherever it shows up
	return err
}

// newModelRegistry builds the configured models, each provider measured
// into the metrics registry (built here: the models are its first users).
func (d *daemonParts) newModelRegistry() error {
	models, err := configuredModels(d.cfg.model, d.o.app.providers)
	if err != nil {
		return err
	}
	d.build = buildInfo()
	d.reg = metrics.New(d.build)
	for i, m := range models {
		if problem := providerProblem(m.Provider); problem != "" {
			d.log.Warn("a configured model provider cannot work: its turns (and, for the default, playbook runs) will fail until it is fixed",
				"model", m.Name, "base_url", providerURL(m.Provider), "problem", problem)
		}
		models[i].Provider = metrics.InstrumentProvider(m.Provider, m.Name, d.reg)
	}
	d.models = models
	return nil
}

// openStore opens StateDB and sets the main listener's edge. On an error
// the edge is still set: the daemon serves service_failure behind it. A
// database that cannot be reached at start is waited for (awaitStore).
func (d *daemonParts) openStore(ctx context.Context) error {
	if half := d.o.lease.expiry / 2; d.cfg.pg.IdleInTransactionTimeout > half {
		// A paused daemon's locks must be gone before its lease expires
		// and the others take its work over.
		d.log.Info("--db-idle-tx-timeout lowered to half the lease expiry", "db_idle_tx_timeout", half)
		d.cfg.pg.IdleInTransactionTimeout = half
	}
	d.edge = httpapi.Config{Token: d.token, Logger: d.log, AllowedHosts: allowedHosts(d.cfg.addr, d.o.http.allowedHosts), BodyTimeout: d.o.http.bodyTimeout}
	st, m, err := openStore(ctx, d.cfg)
	if store.Transient(err) {
		st, m, err = d.awaitStore(ctx, err)
	}
	for _, p := range datadir.Exposed(d.cfg.dataDir) {
		d.log.Warn("the data directory is open to other users", "problem", p)
	}
	if err != nil {
		return err
	}
	m.log(d.log, databaseName(d.cfg))
	d.st, d.version = st, m.version
	d.undo = append(d.undo, func() { st.Close() })
	observeStore(st, d.reg)
	return nil
}

// errDatabaseDown is a database that stayed unreachable at start for the
// whole outage budget: serve exits non-zero, for its supervisor
// (systemd's Restart=on-failure, a container's restart policy) to start
// it again.
var errDatabaseDown = errors.New("StateDB stayed unreachable at start")

// awaitStore waits for a database that could not be reached at start (a
// PostgreSQL server still starting, restarting or failing over): it tries
// again with the backoff of store.RideOut, from 50 ms to 2 s, saying so in
// the log every 10 s, for --db-outage-budget. Nothing listens meanwhile:
// the daemon is still starting. Past the budget it gives up with
// errDatabaseDown; an error that is not an outage ends the wait at once.
func (d *daemonParts) awaitStore(ctx context.Context, first error) (database, migrated, error) {
	budget, name := d.o.lease.outageBudget, databaseName(d.cfg)
	d.log.Warn("StateDB unreachable at start: waiting for it", "db", name, "budget", budget, "err", first)
	start, wait, attempts, reported := time.Now(), store.FirstOutageBackoff, 1, time.Now()
	err := first
	for time.Since(start)+wait <= budget {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return database{}, migrated{}, ctx.Err()
		case <-t.C:
		}
		var st database
		var m migrated
		attempts++
		st, m, err = openStore(ctx, d.cfg)
		switch {
		case err == nil:
			d.log.Info("StateDB reachable: starting", "db", name, "waited", time.Since(start), "attempts", attempts)
			return st, m, nil
		case !store.Transient(err):
			return database{}, migrated{}, err
		case time.Since(reported) >= 10*time.Second:
			d.log.Info("still waiting for StateDB", "db", name, "waited", time.Since(start), "budget", budget, "attempts", attempts, "err", err)
			reported = time.Now()
		}
		wait = min(2*wait, store.MaxOutageBackoff)
	}
	d.log.Error("StateDB stayed unreachable at start: exiting for the supervisor to start the daemon again", "db", name,
		"waited", time.Since(start), "budget", budget, "attempts", attempts, "err", err)
	return database{}, migrated{}, fmt.Errorf("%w for %s (%d attempts; --db-outage-budget): %w", errDatabaseDown, budget.Round(time.Second), attempts, err)
}

// pauseRegister is the start's pause point (STUDIO_PAUSE_AT) just before
// the daemon registers its instance: a process test stops the database
// there, between the store's opening and the registration.
const pauseRegister = "start-register"

// rideOut runs a start step that writes to the database, trying it again
// while the database is briefly unreachable (restarting or failing over
// after the store opened, or while a daemon that lost its lease starts
// afresh), for --db-outage-budget. Every such step is safe to run again:
// seeding finds its rows, a registration its own instance, recovery
// rereads what is left to recover, the owner's bootstrap its principal.
func (d *daemonParts) rideOut(ctx context.Context, step string, f func(context.Context) error) error {
	return store.RideOut(ctx, d.o.lease.outageBudget, nil, func(wait time.Duration, err error) {
		d.log.Warn("StateDB unreachable while starting: trying again", "step", step, "wait", wait, "err", err)
	}, f)
}

// newApplication builds the application services over the store and the
// default model (not started yet: startWork fails the runs a previous
// process left behind, then runs the executor and the scheduler), seeds a
// new database, and sets this daemon's identity among those sharing it.
func (d *daemonParts) newApplication(ctx context.Context) error {
	// Several daemons share a PostgreSQL database; a SQLite file has one
	// (the data directory's lock).
	d.shared, _ = usesPostgres(d.cfg)
	d.instance = uuid.NewString()
	ao := d.o.app
	var others []studio.NamedModel
	for _, m := range d.models[1:] {
		others = append(others, studio.NamedModel{Name: m.Name, Provider: m.Provider})
	}
	svc, err := studio.New(studio.Config{Instance: d.instance, Shared: d.shared, OutageBudget: d.o.lease.outageBudget, OtherModels: others,
		Lease: studio.LeaseSettings{Renew: d.o.lease.renew, Expiry: d.o.lease.expiry},
		Store: d.st, Maintenance: d.st.maint, Provider: d.models[0].Provider, Logger: d.log, Workers: ao.runWorkers, Observer: d.reg,
		RecoveryWindow: ao.recoveryWindow, SchedulerInterval: studio.DefaultSchedulerInterval, ShutdownGrace: d.o.grace, Retention: ao.retention})
	if err != nil {
		return err
	}
	d.svc = svc
	if ao.noSeed {
		return nil
	}
	// Daemons that start together on a new database seed one at a time:
	// the second finds the first one's rows.
	var created bool
	err = d.rideOut(ctx, "seed", func(ctx context.Context) error {
		return d.st.Exclusive(ctx, func(ctx context.Context) error {
			var err error
			created, err = svc.Seed(ctx)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("create starter content: %w", err)
	}
	if created {
		d.log.Info("created starter playbooks", "playbooks", len(studio.StarterPlaybooks))
	}
	return nil
}

// newCoordinator builds the operator's turn engine (not recovering yet),
// its tools over the application services, and the ring of recent
// activity it reports to beside the metrics and logs.
func (d *daemonParts) newCoordinator() {
	d.recent = turnstats.New(1024, nil)
	o := d.o
	d.coord = coordinator.New(coordinator.Config{Store: d.st, Provider: d.models[0].Provider, Models: d.models,
		Commands: d.svc, Logger: d.log, ShutdownGrace: o.grace,
		Workers: o.turn.workers, MaxQueuedTurns: o.turn.maxQueued,
		FirstEventTimeout: o.turn.firstEvent, IdleTimeout: o.turn.idle, AttemptTimeout: o.turn.attempt, ModelBudget: o.turn.budget,
		Tools: tools.Default(d.svc, spaces.Default, time.Now), ProposalTTL: o.app.proposalTTL, DenialMemory: o.app.denialMemory, SweepInterval: 5 * time.Second, TextFlush: o.app.textFlush,
		Observer: coordinator.Observers(d.recent, coordObserver{reg: d.reg, log: d.log}), Instance: d.instance, Shared: d.shared,
		OutageBudget: o.lease.outageBudget, CallTimeout: o.lease.callTimeoutFor(d.shared), PauseAt: pauseAt(d.log)})
	d.svc.SettleProposalsWith(d.coord)
}

// startLease opens the main listener (its address goes into the lease)
// and starts renewing this daemon's lease, reaping dead daemons' work
// where the database is shared.
func (d *daemonParts) startLease(ctx context.Context) error {
	ln, err := listen(d.cfg, d.o.http, d.lock)
	if err != nil {
		return err
	}
	d.ln = ln
	if pause := pauseAt(d.log); pause != nil {
		pause(pauseRegister)
	}
	err = d.rideOut(ctx, "register instance", func(ctx context.Context) error {
		var err error
		d.keeper, err = lease.Start(ctx, lease.Config{
			Store: d.st, Renew: d.o.lease.renew, Expiry: d.o.lease.expiry, Logger: d.log, Reap: d.shared, Reapers: []lease.Reaper{d.coord, d.svc},
			Instance: store.Instance{ID: d.instance, Address: "http://" + ln.Addr().String(), PID: int64(os.Getpid()), Version: d.build.Version},
		})
		return err
	})
	if err != nil {
		ln.Close()
		return err
	}
	if d.shared {
		// Self-fencing: no decision, claim or execution on a lease this
		// daemon cannot prove current.
		d.coord.UseLease(d.keeper)
	}
	d.reg.ObserveLeases(func() metrics.LeaseStats {
		s := d.keeper.Stats()
		return metrics.LeaseStats{Instances: s.Instances, Renewals: s.Renewals, RenewFailures: s.RenewFailures, Reaped: s.Reaped}
	})
	return nil
}

// abort ends a start that failed after the lease began: the lease ends at
// once, for no other daemon to wait for it.
func (d *daemonParts) abort(err error) error {
	d.ln.Close()
	d.coord.Shutdown(context.Background())
	d.svc.Stop(context.Background())
	if serr := d.keeper.Stop(context.Background()); serr != nil {
		d.log.Warn("end the lease", "err", serr)
	}
	return err
}

// startWork recovers the turns and runs a previous process left behind
// and starts the application's executor and scheduler.
func (d *daemonParts) startWork(ctx context.Context) error {
	if err := d.rideOut(ctx, "recover turns", d.coord.Recover); err != nil {
		return fmt.Errorf("recover turns: %w", err)
	}
	if err := d.svc.Start(ctx); err != nil {
		return fmt.Errorf("start application services: %w", err)
	}
	return nil
}

// newHTTPServers builds the main listener's server (the operator
// protocol, the application API, the cockpit, MCP) and, with
// --metrics-addr, starts the metrics listener.
func (d *daemonParts) newHTTPServers(ctx context.Context) error {
	page, err := web.New(*d.coord.Routes())
	if err != nil {
		return fmt.Errorf("cockpit assets: %w", err)
	}
	edge := &d.edge
	edge.NotFoundPage = page.NotFound // a browser's unknown address gets the cockpit's own page
	err = d.rideOut(ctx, "bootstrap owner", func(ctx context.Context) error {
		_, err := httpapi.EnsureOwner(ctx, d.st, d.token, time.Now())
		return err
	})
	if err != nil {
		return err
	}
	if legacyToken(d.token) {
		d.log.Warn("the token file holds a token from before stu_ tokens: it keeps working, but secret scanners do not recognise it; "+
			"`studio token --rotate` replaces it", "file", tokenPath(d.cfg.dataDir))
	}
	convs := conversations.New(conversations.Config{Store: d.st, Engine: d.coord, RecoveryWindow: d.o.app.recoveryWindow})
	edge.Conversations, edge.Streams = convs, convs
	edge.Turns, edge.Proposals, edge.Effects, edge.Catalog = d.coord, d.coord, d.coord, d.coord
	edge.App, edge.Recent, edge.Extra, edge.Heartbeat, edge.Metrics = d.svc, d.recent, []func(*http.ServeMux){page.Register}, d.o.app.heartbeat, d.reg
	ms, err := databaseMigrations(d.cfg)
	if err != nil {
		return err
	}
	var holder httpapi.LeaseHolder // a lone SQLite daemon's lease is bookkeeping only
	if d.shared {
		holder = d.keeper
	}
	edge.Ready = httpapi.StoreReadiness(d.st, len(ms), holder)
	if w, ok := d.st.stateDB.(interface{ WriterOldestWait() time.Duration }); ok {
		edge.Ready = httpapi.WithWriterStall(edge.Ready, w.WriterOldestWait, httpapi.WriterStallLimit)
	}
	edge.Lease, edge.CallTimeout = holder, d.o.lease.callTimeoutFor(d.shared)
	edge.Principals, edge.Webhooks, edge.AuthProxy = d.st, d.st, d.o.http.authProxy
	edge.Policy = policy.NewGate(policy.GateConfig{Engine: d.o.http.policy, Record: policy.AuditDenials(d.st, time.Now), Logger: d.log})
	agents := mcpserver.New(mcpserver.Config{Coordinator: d.coord, Tools: d.coord.Tools(), Version: readVersion().Version, Logger: d.log, Metrics: d.reg,
		CallsPerMinute: d.o.http.mcpCallsPerMinute, CallBurst: d.o.http.mcpCallBurst})
	edge.MCP = agents.Handler
	edge.AGUI = func(ds httpapi.DoorSupport) http.Handler {
		return agui.New(agui.Config{Conversations: convs, Turns: d.coord, Refuse: ds.Refuse, AccessSignal: ds.AccessSignal, StillAllowed: ds.StillAllowed,
			Logger: d.log, Heartbeat: d.o.app.heartbeat})
	}
	d.api = httpapi.New(*edge)
	d.reg.ObserveReadiness(func() bool {
		reason, _ := d.api.Readiness(context.Background())
		return reason == ""
	})
	d.srv = httpapi.NewHTTPServer(d.api.Observed(), d.log)
	return d.startMetricsListener()
}

// startMetricsListener serves /metrics (and, with --pprof, Go's profiles)
// on --metrics-addr.
func (d *daemonParts) startMetricsListener() error {
	obs := d.o.obs
	if obs.metricsAddr == "" {
		if obs.pprof {
			return errors.New("--pprof serves on the --metrics-addr listener: give both")
		}
		return nil
	}
	medge := httpapi.EdgeConfig{AllowedHosts: allowedHosts(obs.metricsAddr, d.edge.AllowedHosts), BodyTimeout: d.o.http.bodyTimeout, Logger: d.log, Errors: d.reg.HTTPError}
	msrv, maddr, err := serveMetrics(obs.metricsAddr, d.reg, obs.pprof, medge, d.errc)
	if err != nil {
		return err
	}
	d.undo = append(d.undo, func() { msrv.Close() })
	d.log.Info("metrics serving without auth", "metrics_addr", "http://"+maddr+"/metrics", "pprof", obs.pprof)
	return nil
}

// announce logs what serves where and prints the cockpit's sign-in URL.
func (d *daemonParts) announce() {
	d.log.Info("studio serving", "addr", "http://"+d.ln.Addr().String(), "token_file", tokenPath(d.cfg.dataDir),
		"db", databaseName(d.cfg), "schema_version", d.version, "model", d.models[0].Name, "models", len(d.models), "version", d.build.Version, "instance", d.instance)
	printSignInURL(os.Stdout, d.ln.Addr(), d.token, d.cfg.dataDir, d.o.obs.printTokenURL || isTerminal(os.Stdout))
}

// startWebhooks runs the webhook outbox's dispatcher: deliveries this
// daemon claims, posted until the daemon stops (before the store closes;
// any daemon's dispatcher takes over a claim this one leaves).
func (d *daemonParts) startWebhooks(ctx context.Context) {
	// The receivers' secrets and URLs, by value: a URL may itself be the
	// credential (Slack, Discord, Teams).
	if list, err := d.st.ListWebhooks(ctx); err == nil {
		for _, w := range list {
			redact.AddKnown(w.Secret, w.URL)
		}
	}
	hooks := webhooks.New(webhooks.Config{Store: d.st, Instance: d.instance, Timeout: d.o.webhook.timeout, Concurrency: d.o.webhook.concurrency,
		PublicURL: d.o.webhook.publicURL, Observer: d.reg, Logger: d.log})
	d.reg.ObserveWebhookQueue(func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return hooks.QueueAge(ctx)
	})
	hooksCtx, stopHooks := context.WithCancel(ctx)
	hooksDone := make(chan struct{})
	go func() { defer close(hooksDone); hooks.Run(hooksCtx) }()
	d.undo = append(d.undo, func() { stopHooks(); <-hooksDone })
}

// run serves the main listener until ctx ends, a listener fails or the
// lease is lost, then shuts down.
func (d *daemonParts) run(ctx context.Context) error {
	go func() { d.errc <- d.srv.Serve(d.ln) }()
	var failure error
	select {
	case failure = <-d.errc:
	case <-ctx.Done():
	case <-d.keeper.Lost():
		// Another daemon took this one's work over: every write of the
		// previous instance is fenced off already. Start afresh as a new
		// instance, in place; or exit, for a supervisor to restart.
		if !d.o.lease.exitOnLoss {
			d.answerInFlight()
			return rejoin(d.log, d.ln, d.keeper.Err())
		}
		failure = d.keeper.Err()
	}
	d.shutdown()
	return failure
}

// rejoinDrain is how long a daemon that lost its lease waits for the
// requests in flight before it replaces itself: what they wait on now
// fails at once (its writes are fenced off), so a moment is enough.
const rejoinDrain = 2 * time.Second

// answerInFlight stops taking requests and gives those in flight a moment
// to be answered before the process replaces itself, so that a decision
// sent to this daemon gets its typed answer rather than a cut connection.
// Streams are not waited for: they reconnect with their cursor.
func (d *daemonParts) answerInFlight() {
	d.api.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), rejoinDrain)
	defer cancel()
	if err := d.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		d.log.Warn("requests still in flight when rejoining", "err", err)
	}
}

// shutdown lets running turns and runs finish within the grace, then
// stops the servers and ends the lease (after the work stopped, before
// the store closes).
func (d *daemonParts) shutdown() {
	// What becomes of each turn and run in flight is logged as it ends
	// ("turn interrupted by shutdown", "run interrupted by shutdown").
	d.log.Info("shutting down", "turns_in_flight", d.coord.TurnsInFlight(), "runs_in_flight", d.svc.RunsInFlight(), "grace", d.o.grace)
	d.api.Drain() // /readyz says so while running turns finish
	ctx, cancel := context.WithTimeout(context.Background(), d.o.grace+10*time.Second)
	defer cancel()
	d.coord.Shutdown(ctx)
	d.svc.Stop(ctx)
	d.api.Close()
	if err := d.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		d.log.Warn("http shutdown", "err", err)
	}
	if err := d.keeper.Stop(ctx); err != nil {
		d.log.Warn("end the lease", "err", err)
	}
}
