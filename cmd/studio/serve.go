package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/activity"
	"github.com/studio/operator/internal/app"
	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/datadir"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/lease"
	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/routes"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/postgres"
	"github.com/studio/operator/internal/store/sqlstore"
	"github.com/studio/operator/internal/tools"
	"github.com/studio/operator/internal/webhooks"
	"github.com/studio/operator/web"
)

func newMigrateCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply StateDB migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lock, err := lockDataDir(cfg)
			if err != nil {
				return err
			}
			defer lock.Release()
			st, v, err := openStore(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "StateDB %s at schema version %d\n", databaseName(cfg), v)
			return nil
		},
	}
}

// serveOptions are the flags of `studio serve`, by concern.
type serveOptions struct {
	grace   time.Duration // how long a shutdown waits for turns and streams
	turn    turnOptions
	app     appOptions
	http    httpOptions
	obs     obsOptions
	lease   leaseOptions
	webhook webhookOptions
}

// appOptions configure the application services of `studio serve`.
type appOptions struct {
	providers      []string // --provider entries: more models to choose from
	noSeed         bool
	recoveryWindow time.Duration
	runWorkers     int
	proposalTTL    time.Duration
	textFlush      time.Duration
	heartbeat      time.Duration
	retention      time.Duration // conversations unused this long are removed; 0: kept
}

// obsOptions configure logs and metrics of `studio serve`.
type obsOptions struct {
	logFormat   string
	logLevel    string
	metricsAddr string
	// printTokenURL prints the sign-in URL with the token even when
	// stdout is not a terminal (tests and studio bench read it there).
	printTokenURL bool
	pprof         bool // Go's profiles on the metrics listener
}

// turnOptions configure the operator's turns: the worker pool, its queue
// bound and the model deadlines.
type turnOptions struct {
	workers    int
	maxQueued  int
	firstEvent time.Duration
	idle       time.Duration
	attempt    time.Duration
	budget     time.Duration
}

// leaseOptions configure the daemon's instance lease: how daemons that
// share one database learn that one of them died.
type leaseOptions struct {
	renew  time.Duration
	expiry time.Duration
	// exitOnLoss exits when another daemon took this one's work over,
	// instead of rejoining as a new instance (rejoin).
	exitOnLoss bool
	// outageBudget is how long writes ride out an unavailable database.
	outageBudget time.Duration
}

// webhookOptions configure the dispatcher of the webhook outbox.
type webhookOptions struct {
	// publicURL is the cockpit's address as people reach it, for the
	// links in Slack messages ("" leaves them out).
	publicURL   string
	timeout     time.Duration
	concurrency int
}

// httpOptions configure the daemon's HTTP edge.
type httpOptions struct {
	allowedHosts   []string
	maxClientConns int
	maxConns       int
	bodyTimeout    time.Duration
	// secondApproverFor: risks and impacts whose proposals their own
	// turn's principal cannot confirm (four-eyes).
	secondApproverFor []string
	// authProxy* configure sign-in by a trusted proxy's header.
	authProxyHeader, authProxyGroupsHeader, authProxyDefaultRole string
	authProxyTrusted, authProxyGroupRoles                        []string
	authProxy                                                    *httpapi.AuthProxy
}

// authProxyConfig is the sign-in proxy of the flags, nil without
// --auth-proxy-header; a flag that makes no sense alone is a usage error.
func authProxyConfig(ho httpOptions) (*httpapi.AuthProxy, error) {
	if ho.authProxyHeader == "" {
		if len(ho.authProxyTrusted) > 0 || ho.authProxyGroupsHeader != "" || len(ho.authProxyGroupRoles) > 0 {
			return nil, fmt.Errorf("--auth-proxy-trusted, --auth-proxy-groups-header and --auth-proxy-group-role need --auth-proxy-header")
		}
		return nil, nil
	}
	trusted, err := httpapi.ParseTrusted(ho.authProxyTrusted)
	if err != nil {
		return nil, fmt.Errorf("--auth-proxy-trusted: %w", err)
	}
	roles, err := httpapi.ParseGroupRoles(ho.authProxyGroupRoles)
	if err != nil {
		return nil, fmt.Errorf("--auth-proxy-group-role: %w", err)
	}
	ap := &httpapi.AuthProxy{Header: ho.authProxyHeader, Trusted: trusted, DefaultRole: protocol.Role(ho.authProxyDefaultRole),
		GroupsHeader: ho.authProxyGroupsHeader, GroupRoles: roles}
	if err := ap.Validate(); err != nil {
		return nil, err
	}
	return ap, nil
}

func newServeCmd(cfg *config) *cobra.Command {
	var o serveOptions
	var keep retentionFlag
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: cockpit, application API and operator protocol",
		Example: `  studio serve
  studio serve --model openai --log-format json --metrics-addr 127.0.0.1:9090
  STUDIO_DATABASE_URL=postgres://studio@db/studio studio serve --addr 0.0.0.0:8765`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(os.Stderr, o.obs.logFormat, o.obs.logLevel)
			if err != nil {
				return usageError{err}
			}
			slog.SetDefault(log)
			if o.app.retention, err = retention(cmd.Flags(), &keep); err != nil {
				return err
			}
			for _, v := range o.http.secondApproverFor {
				if !slices.Contains(httpapi.SecondApproverValues, v) {
					return usageError{fmt.Errorf("--second-approver-for: %q is not one of %v", v, httpapi.SecondApproverValues)}
				}
			}
			if err := checkPublicURL(o.webhook.publicURL); err != nil {
				return usageError{err}
			}

			if o.http.authProxy, err = authProxyConfig(o.http); err != nil {
				return usageError{err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, cfg, log, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.obs.logFormat, "log-format", envOr("STUDIO_LOG_FORMAT", "text"), "log format on stderr: text or json (env STUDIO_LOG_FORMAT)")
	f.StringVar(&o.obs.logLevel, "log-level", envOr("STUDIO_LOG_LEVEL", "info"), "least level logged: debug, info, warn or error (env STUDIO_LOG_LEVEL)")
	f.BoolVar(&o.obs.printTokenURL, "print-token-url", envOr("STUDIO_PRINT_TOKEN_URL", "") == "1",
		"print the sign-in URL with the token on stdout even when stdout is not a terminal (env STUDIO_PRINT_TOKEN_URL=1); by default a journal or a container log gets the address and `studio token` instead")
	f.BoolVar(&o.obs.pprof, "pprof", false, "also serve Go's profiles (net/http/pprof) under /debug/pprof/ on --metrics-addr, without auth")
	f.StringVar(&o.obs.metricsAddr, "metrics-addr", envOr("STUDIO_METRICS_ADDR", ""), "also serve GET /metrics here, without auth, for scrapers (env STUDIO_METRICS_ADDR; empty: only on --addr, with the token)")
	f.StringVar(&cfg.model, "model", envOr("STUDIO_MODEL", "offline"), "the default model: offline, openai, anthropic, script[:PATH], or the name of a --provider entry (env STUDIO_MODEL)")
	f.StringArrayVar(&o.app.providers, "provider", splitNonEmpty(os.Getenv("STUDIO_PROVIDERS"), ";"),
		"one more model conversations may choose: NAME=KIND[,model=M][,base-url=U][,api-key-env=VAR][,context-tokens=N]; repeatable (env STUDIO_PROVIDERS, ;-separated)")
	f.DurationVar(&o.grace, "shutdown-grace", coordinator.DefaultShutdownGrace, "how long running turns may finish on shutdown")
	f.IntVar(&o.turn.workers, "workers", coordinator.DefaultWorkers, "turns that talk to the model at once")
	f.IntVar(&o.turn.maxQueued, "max-queued-turns", coordinator.DefaultMaxQueuedTurns, "new turns that may wait for a worker; past it a submission answers 429 rate_limited")
	f.DurationVar(&o.turn.firstEvent, "model-first-event-timeout", coordinator.DefaultFirstEventTimeout, "how long a model attempt may take to send its first event")
	f.DurationVar(&o.turn.idle, "model-idle-timeout", coordinator.DefaultIdleTimeout, "how long a model stream may pause between two events")
	f.DurationVar(&o.turn.attempt, "model-attempt-timeout", coordinator.DefaultAttemptTimeout, "how long one model attempt may take in all")
	f.DurationVar(&o.turn.budget, "model-turn-budget", coordinator.DefaultModelBudget, "how long the model may take in all for one turn (its attempts and the waits between retries): one slow provider cannot hold the workers")
	f.IntVar(&o.app.runWorkers, "run-workers", app.DefaultWorkers, "playbook runs that execute at once")
	f.DurationVar(&o.app.recoveryWindow, "recovery-window", app.DefaultRecoveryWindow, "how long a deleted conversation stays recoverable before purge_deleted_conversations may remove it")
	cfg.walAutocheckpoint = new(int)
	f.IntVar(cfg.walAutocheckpoint, "sqlite-wal-autocheckpoint", envInt("STUDIO_SQLITE_WAL_AUTOCHECKPOINT", -1),
		"SQLite: copy the WAL into the database file after a commit that leaves this many pages in it; 0 leaves checkpoints to Litestream (README, \"Continuous replication\"); negative: SQLite's default, 1000 (env STUDIO_SQLITE_WAL_AUTOCHECKPOINT)")
	addRetentionFlag(f, &keep, "remove conversations not used (no turn, frame or change) for this long, except pinned ones and ones with an active turn: checked at start and hourly, audited")
	f.BoolVar(&o.app.noSeed, "no-seed", false, "do not create the starter playbooks in a new database")
	f.DurationVar(&o.app.proposalTTL, "proposal-ttl", coordinator.DefaultProposalTTL, "how long a proposal waits for confirmation (shown in every proposal)")
	f.DurationVar(&o.app.textFlush, "text-flush", coordinator.DefaultTextFlush, "how long model text is coalesced before it is stored as a frame (at most 8 KiB either way)")
	f.DurationVar(&o.app.heartbeat, "heartbeat", 15*time.Second, "interval of the comment heartbeats on idle SSE streams")
	f.StringSliceVar(&o.http.secondApproverFor, "second-approver-for", nil,
		"four-eyes: proposals of these risks (mutate, execute, admin) or impacts (destructive, irreversible) cannot be confirmed by the principal whose turn produced them, e.g. execute,destructive (default: none)")
	f.StringVar(&o.http.authProxyHeader, "auth-proxy-header", envOr("STUDIO_AUTH_PROXY_HEADER", ""),
		"sign-in behind a proxy: the header naming the signed-in user, e.g. X-Forwarded-User, believed only from --auth-proxy-trusted (env STUDIO_AUTH_PROXY_HEADER; README \"Teams\")")
	f.StringSliceVar(&o.http.authProxyTrusted, "auth-proxy-trusted", splitNonEmpty(os.Getenv("STUDIO_AUTH_PROXY_TRUSTED"), ","),
		"the sign-in proxy's addresses (CIDRs or addresses, the TCP peer): the header from anywhere else is refused (env STUDIO_AUTH_PROXY_TRUSTED)")
	f.StringVar(&o.http.authProxyGroupsHeader, "auth-proxy-groups-header", envOr("STUDIO_AUTH_PROXY_GROUPS_HEADER", ""),
		"the header with the user's groups (comma-separated), e.g. X-Forwarded-Groups: then the groups set the role at every sign-in (env STUDIO_AUTH_PROXY_GROUPS_HEADER)")
	f.StringSliceVar(&o.http.authProxyGroupRoles, "auth-proxy-group-role", splitNonEmpty(os.Getenv("STUDIO_AUTH_PROXY_GROUP_ROLES"), ","),
		"GROUP=ROLE, e.g. studio-admins=admin,studio-ops=operator: a user's role is the highest of its mapped groups (env STUDIO_AUTH_PROXY_GROUP_ROLES)")
	f.StringVar(&o.http.authProxyDefaultRole, "auth-proxy-default-role", envOr("STUDIO_AUTH_PROXY_DEFAULT_ROLE", string(protocol.RoleViewer)),
		"the role of a user the proxy names for the first time (and, with groups, of one in no mapped group)")
	f.StringSliceVar(&o.http.allowedHosts, "allowed-hosts", nil, "Host header names answered besides loopback, IP addresses and the --addr host (behind a proxy: the public name; *.example.com for subdomains)")
	f.IntVar(&o.http.maxClientConns, "max-client-conns", httpapi.DefaultMaxClientConns, "connections one client address may hold open at once (0: no cap, e.g. behind a proxy)")
	f.IntVar(&o.http.maxConns, "max-conns", httpapi.DefaultMaxConns, "connections the --addr listener holds open at once, all clients together (0: no cap); --metrics-addr holds at most "+strconv.Itoa(httpapi.MetricsMaxConns))
	f.DurationVar(&o.http.bodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout, "how long a request body may take to arrive")
	f.StringVar(&o.webhook.publicURL, "public-url", envOr("STUDIO_PUBLIC_URL", ""), "the cockpit's address as people reach it (https://studio.example.com), for the links in webhook messages (env STUDIO_PUBLIC_URL; empty: no links)")
	f.DurationVar(&o.webhook.timeout, "webhook-timeout", webhooks.DefaultTimeout, "how long a webhook receiver may take to answer one delivery; a slower one is tried again later")
	f.IntVar(&o.webhook.concurrency, "webhook-concurrency", webhooks.DefaultConcurrency, "webhook deliveries this daemon posts at once")
	f.DurationVar(&o.lease.renew, "lease-renew", lease.DefaultRenew, "how often this daemon renews its lease in StateDB")
	f.DurationVar(&o.lease.expiry, "lease-expiry", lease.DefaultExpiry, "how long a lease lasts unrenewed; then another daemon on the same database ends this daemon's work")
	f.BoolVar(&o.lease.exitOnLoss, "exit-on-lease-loss", false, "exit (status 1) when another daemon took this one's work over, instead of rejoining as a new instance")
	f.DurationVar(&o.lease.outageBudget, "db-outage-budget", coordinator.DefaultOutageBudget, "how long turns and runs retry their writes while the database is unavailable (a restart, a failover) before they fail")
	f.DurationVar(&cfg.pg.LockTimeout, "db-lock-timeout", postgres.DefaultLockTimeout, "PostgreSQL: longest wait for a row lock (lock_timeout); the write is then retried")
	f.DurationVar(&cfg.pg.StatementTimeout, "db-statement-timeout", postgres.DefaultStatementTimeout, "PostgreSQL: longest statement (statement_timeout)")
	f.DurationVar(&cfg.pg.IdleInTransactionTimeout, "db-idle-tx-timeout", postgres.DefaultIdleInTransactionTimeout,
		"PostgreSQL: a session idle inside a transaction this long is ended, with its locks (idle_in_transaction_session_timeout); at most half the --lease-expiry")
	return cmd
}

func serve(ctx context.Context, cfg *config, log *slog.Logger, o serveOptions) error {
	lock, err := lockDataDir(cfg)
	if err != nil {
		return err
	}
	defer lock.Release()
	token, err := loadOrCreateToken(cfg.dataDir)
	if err != nil {
		return err
	}
	models, err := configuredModels(cfg.model, o.app.providers)
	if err != nil {
		return err
	}
	build := buildInfo()
	reg := metrics.New(build)
	for i, m := range models {
		if problem := providerProblem(m.Provider); problem != "" {
			log.Warn("a configured model provider cannot work: its turns (and, for the default, playbook runs) will fail until it is fixed",
				"model", m.Name, "problem", problem)
		}
		models[i].Provider = metrics.InstrumentProvider(m.Provider, m.Name, reg)
	}
	provider := models[0].Provider
	if half := o.lease.expiry / 2; cfg.pg.IdleInTransactionTimeout > half {
		// A paused daemon's locks must be gone before its lease expires
		// and the others take its work over.
		log.Info("--db-idle-tx-timeout lowered to half the lease expiry", "db_idle_tx_timeout", half)
		cfg.pg.IdleInTransactionTimeout = half
	}
	st, version, err := openStore(ctx, cfg)
	for _, p := range datadir.Exposed(cfg.dataDir) {
		log.Warn("the data directory is open to other users", "problem", p)
	}
	edge := httpapi.Config{Token: token, Logger: log, AllowedHosts: allowedHosts(cfg.addr, o.http.allowedHosts), BodyTimeout: o.http.bodyTimeout}
	if err != nil {
		// No in-memory fallback under the same API (ADR D1): every call
		// answers service_failure until the database is fixed and the
		// daemon restarted.
		log.Error("StateDB unavailable: serving service_failure for every API call", "err", err)
		return serveUnavailable(ctx, cfg, log, o.http, lock, httpapi.Unavailable(edge, err.Error()))
	}
	defer st.Close()
	observeStore(st, reg)
	// Several daemons share a PostgreSQL database; a SQLite file has one
	// (the data directory's lock).
	shared, _ := usesPostgres(cfg)
	instance := uuid.NewString()
	leases := app.LeaseSettings{Renew: o.lease.renew, Expiry: o.lease.expiry}
	svc, err := newApp(ctx, st, provider, log, reg, o.grace, o.app, app.Config{Instance: instance, Shared: shared, Lease: leases,
		OutageBudget: o.lease.outageBudget})
	if err != nil {
		return err
	}
	// The System space's charts of recent turns and model failures, beside
	// the metrics and logs observer.
	recent := activity.New(1024, nil)
	coord := coordinator.New(coordinator.Config{Store: st, Provider: provider, Models: models,
		Commands: svc, Logger: log, ShutdownGrace: o.grace,
		Workers: o.turn.workers, MaxQueuedTurns: o.turn.maxQueued,
		FirstEventTimeout: o.turn.firstEvent, IdleTimeout: o.turn.idle, AttemptTimeout: o.turn.attempt, ModelBudget: o.turn.budget,
		Tools: tools.Default(svc, routes.Default, time.Now), ProposalTTL: o.app.proposalTTL, SweepInterval: 5 * time.Second, TextFlush: o.app.textFlush,
		Observer: coordinator.Observers(recent, coordObserver{reg: reg, log: log}), Instance: instance, Shared: shared,
		OutageBudget: o.lease.outageBudget})
	svc.SettleProposalsWith(coord)
	ln, err := listen(cfg, o.http, lock)
	if err != nil {
		return err
	}
	keeper, err := lease.Start(ctx, lease.Config{
		Store: st, Renew: o.lease.renew, Expiry: o.lease.expiry, Logger: log, Reap: shared, Reapers: []lease.Reaper{coord, svc},
		Instance: store.Instance{ID: instance, Address: "http://" + ln.Addr().String(), PID: int64(os.Getpid()), Version: build.Version},
	})
	if err != nil {
		ln.Close()
		return err
	}
	reg.ObserveLeases(func() metrics.LeaseStats {
		s := keeper.Stats()
		return metrics.LeaseStats{Instances: s.Instances, Renewals: s.Renewals, RenewFailures: s.RenewFailures, Reaped: s.Reaped}
	})
	// Until the loop below: a failed start ends the lease at once.
	abort := func(err error) error {
		ln.Close()
		coord.Shutdown(context.Background())
		svc.Stop(context.Background())
		if serr := keeper.Stop(context.Background()); serr != nil {
			log.Warn("end the lease", "err", serr)
		}
		return err
	}
	if err := coord.Recover(ctx); err != nil {
		return abort(fmt.Errorf("recover turns: %w", err))
	}
	if err := svc.Start(ctx); err != nil {
		return abort(fmt.Errorf("start application services: %w", err))
	}
	page, err := web.New(*coord.Routes())
	if err != nil {
		return abort(fmt.Errorf("cockpit assets: %w", err))
	}
	edge.NotFoundPage = page.NotFound // a browser's unknown address gets the cockpit's own page
	if _, err := httpapi.EnsureOwner(ctx, st, token, time.Now()); err != nil {
		return abort(err)
	}
	edge.Conversations = conversations.New(conversations.Config{Store: st, Engine: coord, RecoveryWindow: o.app.recoveryWindow})
	edge.Coordinator, edge.App, edge.Recent, edge.Extra, edge.Heartbeat, edge.Metrics = coord, svc, recent, []func(*http.ServeMux){page.Register}, o.app.heartbeat, reg
	ms, err := databaseMigrations(cfg)
	if err != nil {
		return abort(err)
	}
	var holder httpapi.LeaseHolder // a lone SQLite daemon's lease is bookkeeping only
	if shared {
		holder = keeper
	}
	edge.Ready = httpapi.StoreReadiness(st, len(ms), holder)
	edge.Principals, edge.SecondApproverFor, edge.Webhooks, edge.AuthProxy = st, o.http.secondApproverFor, st, o.http.authProxy
	agents := mcpserver.New(mcpserver.Config{Coordinator: coord, Tools: coord.Tools(), Version: readVersion().Version, Logger: log, Metrics: reg})
	edge.MCP = agents.Handler
	api := httpapi.New(edge)
	srv := httpapi.NewHTTPServer(api.Observed(), log)
	errc := make(chan error, 2)
	if o.obs.metricsAddr != "" {
		medge := httpapi.EdgeConfig{AllowedHosts: allowedHosts(o.obs.metricsAddr, edge.AllowedHosts), BodyTimeout: o.http.bodyTimeout, Logger: log, Errors: reg.HTTPError}
		msrv, maddr, err := serveMetrics(o.obs.metricsAddr, reg, o.obs.pprof, medge, errc)
		if err != nil {
			return abort(err)
		}
		defer msrv.Close()
		log.Info("metrics serving without auth", "metrics_addr", "http://"+maddr+"/metrics", "pprof", o.obs.pprof)
	} else if o.obs.pprof {
		return abort(errors.New("--pprof serves on the --metrics-addr listener: give both"))
	}
	log.Info("studio serving", "addr", "http://"+ln.Addr().String(), "token_file", tokenPath(cfg.dataDir),
		"db", databaseName(cfg), "schema_version", version, "model", models[0].Name, "models", len(models), "version", build.Version, "instance", instance)
	printSignInURL(os.Stdout, ln.Addr(), token, cfg.dataDir, o.obs.printTokenURL || isTerminal(os.Stdout))
	// The webhook outbox: deliveries this daemon claims, posted until the
	// daemon stops (before the store closes; any daemon's dispatcher
	// takes over a claim this one leaves).
	hooks := webhooks.New(webhooks.Config{Store: st, Instance: instance, Timeout: o.webhook.timeout, Concurrency: o.webhook.concurrency,
		PublicURL: o.webhook.publicURL, Observer: reg, Logger: log})
	reg.ObserveWebhookQueue(func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return hooks.QueueAge(ctx)
	})
	hooksCtx, stopHooks := context.WithCancel(ctx)
	hooksDone := make(chan struct{})
	go func() { defer close(hooksDone); hooks.Run(hooksCtx) }()
	defer func() { stopHooks(); <-hooksDone }()
	go func() { errc <- srv.Serve(ln) }()
	var failure error
	select {
	case failure = <-errc:
	case <-ctx.Done():
	case <-keeper.Lost():
		// Another daemon took this one's work over: every write of the
		// old instance is fenced off already. Start afresh as a new
		// instance, in place; or exit, for a supervisor to restart.
		if !o.lease.exitOnLoss {
			return rejoin(log, ln, keeper.Err())
		}
		failure = keeper.Err()
	}
	// What becomes of each turn and run in flight is logged as it ends
	// ("turn interrupted by shutdown", "run interrupted by shutdown").
	log.Info("shutting down", "turns_in_flight", coord.TurnsInFlight(), "runs_in_flight", svc.RunsInFlight(), "grace", o.grace)
	api.Drain() // /readyz says so while running turns finish
	shutdownCtx, cancel := context.WithTimeout(context.Background(), o.grace+10*time.Second)
	defer cancel()
	coord.Shutdown(shutdownCtx)
	svc.Stop(shutdownCtx)
	api.Close()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	if err := keeper.Stop(shutdownCtx); err != nil { // after the work stopped, before the store closes
		log.Warn("end the lease", "err", err)
	}
	return failure
}

// checkPublicURL refuses a --public-url that is not an absolute http(s)
// URL.
func checkPublicURL(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--public-url %q: an absolute http or https URL, like https://studio.example.com", v)
	}
	return nil
}

// observeStore sends StateDB's operation timings and group-commit writer
// figures to the metrics, and counts the pending proposals at each scrape.
func observeStore(st database, reg *metrics.Registry) {
	if o, ok := st.stateDB.(interface {
		Observe(sqlstore.Observer)
		WriterOldestWait() time.Duration
	}); ok {
		o.Observe(reg)
		reg.ObserveWriter(o.WriterOldestWait)
	}
	reg.ObservePendingProposals(func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ps, err := st.ListProposals(ctx, store.ListProposalsParams{Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 100_000})
		return len(ps), err
	})
}

// splitNonEmpty splits s on sep, dropping empty parts.
func splitNonEmpty(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// serveUnavailable serves h until ctx ends: the daemon without StateDB.
func serveUnavailable(ctx context.Context, cfg *config, log *slog.Logger, ho httpOptions, lock *datadir.Lock, h http.Handler) error {
	ln, err := listen(cfg, ho, lock)
	if err != nil {
		return err
	}
	srv := httpapi.NewHTTPServer(h, log)
	log.Warn("studio serving without StateDB", "addr", "http://"+ln.Addr().String())
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listen opens the daemon's listener, capped per client, and records its
// address in the data directory's lock for a second daemon's message.
func listen(cfg *config, ho httpOptions, lock *datadir.Lock) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, err
	}
	if err := lock.SetAddr("http://" + ln.Addr().String()); err != nil {
		ln.Close()
		return nil, err
	}
	return httpapi.LimitConns(ln, ho.maxClientConns, ho.maxConns), nil
}

// allowedHosts are the Host names the daemon answers besides loopback and
// IP addresses: the --addr host when it is a name, and --allowed-hosts.
func allowedHosts(addr string, extra []string) []string {
	hosts := slices.Clone(extra)
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		hosts = append(hosts, host)
	}
	return hosts
}

// newApp builds the application services over the store and the model
// provider and seeds a new database; Start runs the executor and the
// scheduler (failing runs a previous process left behind).
func newApp(ctx context.Context, st database, provider model.Provider, log *slog.Logger, obs app.Observer, grace time.Duration, ao appOptions, ac app.Config) (*app.Service, error) {
	ac.Store, ac.Maintenance, ac.Provider, ac.Logger, ac.Workers, ac.Observer = st, st.maint, provider, log, ao.runWorkers, obs
	ac.RecoveryWindow, ac.SchedulerInterval, ac.ShutdownGrace = ao.recoveryWindow, app.DefaultSchedulerInterval, grace
	ac.Retention = ao.retention
	svc, err := app.New(ac)
	if err != nil {
		return nil, err
	}
	if !ao.noSeed {
		// Daemons that start together on a new database seed one at a
		// time: the second finds the first one's rows.
		var created bool
		err := st.Exclusive(ctx, func(ctx context.Context) error {
			var err error
			created, err = svc.Seed(ctx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("create starter content: %w", err)
		}
		if created {
			log.Info("created starter playbooks", "playbooks", len(app.StarterPlaybooks))
		}
	}
	return svc, nil
}

// serveMetrics serves GET /metrics on its own listener, without auth: for a
// scraper on a network the operator chooses (a loopback or cluster-internal
// address); the main listener keeps requiring the token. It has the main
// listener's edge (httpapi.Guard: Host allow-list, timeouts, security
// headers, typed errors) and caps of its own, small, so that a flood of it
// cannot take the descriptors the main listener and the database need.
func serveMetrics(addr string, reg *metrics.Registry, profiles bool, edge httpapi.EdgeConfig, errc chan<- error) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	if profiles {
		// Go's profiles, for finding where a daemon spends its time under
		// load (go tool pprof http://ADDR/debug/pprof/profile).
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	srv := httpapi.NewMetricsServer(httpapi.Guard(mux, edge), edge.Logger)
	limited := httpapi.LimitConns(ln, httpapi.MetricsMaxClientConns, httpapi.MetricsMaxConns)
	go func() {
		if err := srv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("metrics listener: %w", err)
		}
	}()
	return srv, ln.Addr().String(), nil
}

// newLogger builds the daemon's structured logger on w. Every duration
// is written as seconds, a float (0.0123), in both formats: slog's JSON
// handler would write Go's raw nanoseconds and its text handler a Go
// duration string, and one unit everywhere is what a log query can rely on.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationSeconds}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// durationSeconds rewrites a duration attribute as seconds.
func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	}
	return a
}

// printSignInURL prints the cockpit's sign-in URL on stdout, the token in the
// URL fragment: http://127.0.0.1:8765/#token=... A fragment is never sent to
// the server, so the token reaches no request line, proxy or access log; the
// page moves it to sessionStorage and removes it from the address bar.
// This deliberately supersedes "never print the token" for this one line on
// the operator's own terminal. When stdout is not a terminal (withToken
// false) it is kept by a journal or a container log, so the line names the
// address and `studio token` instead. It never goes to the slog logs on
// stderr, and never into a URL query.
func printSignInURL(w io.Writer, addr net.Addr, token, dataDir string, withToken bool) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	base := "http://" + net.JoinHostPort(host, port)
	if !withToken {
		fmt.Fprintf(w, "Studio cockpit: %s/ (sign in with the token that `studio token --data-dir %s` prints)\n", base, dataDir)
		return
	}
	fmt.Fprintf(w, "Studio cockpit: %s/#token=%s\n", base, url.QueryEscape(token))
}
