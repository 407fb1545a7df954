package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/lease"
	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/sse"
	"github.com/studio/operator/internal/store/postgres"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/webhooks"
)

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
	denialMemory   time.Duration
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
	// callTimeout bounds one database call on a turn's and a decision's
	// paths (0: derived from the lease, callTimeout()).
	callTimeout time.Duration
}

// callTimeoutFor is the deadline of one database call on a turn's and a
// decision's paths: as given, else on a shared database half the lease
// expiry (between 1 s and 30 s) — a connection that hangs is given up
// well before the lease runs out — and alone 30 s.
func (o leaseOptions) callTimeoutFor(shared bool) time.Duration {
	switch {
	case o.callTimeout > 0:
		return o.callTimeout
	case shared:
		return min(max(o.expiry/2, time.Second), coordinator.DefaultCallTimeout)
	}
	return coordinator.DefaultCallTimeout
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
	// secondApproverFor: the levels (risks, impacts) of commands that
	// need a second principal (four-eyes); policyFiles: a team's Cedar
	// policies; policy is the engine of both, built before the start.
	secondApproverFor []string
	policyFiles       []string
	policy            *policy.Engine
	// mcpCallsPerMinute and mcpCallBurst are each principal's rate of
	// MCP tool calls.
	mcpCallsPerMinute, mcpCallBurst int
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

// newServeCmd is `studio serve`. It is long because it is the daemon's
// flag table, one declaration per setting (docs/configuration.md lists
// them); the wiring is daemon.go.
func newServeCmd(cfg *config) *cobra.Command {
	var o serveOptions
	var keep retentionFlag
	var printCfg bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: cockpit, application API and operator protocol",
		Example: `  studio serve
  studio serve --model openai --log-format json --metrics-addr 127.0.0.1:9090
  STUDIO_DATABASE_URL=postgres://studio@db/studio studio serve --addr 0.0.0.0:8765`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printCfg {
				return printConfig(cmd.OutOrStdout(), cmd, cfg.settings)
			}
			log, err := newLogger(os.Stderr, o.obs.logFormat, o.obs.logLevel)
			if err != nil {
				return usageError{err}
			}
			slog.SetDefault(log)
			defer flushLog(log)
			o.app.retention = keep.d
			if _, err := policy.ParseLevels(o.http.secondApproverFor); err != nil {
				return usageError{fmt.Errorf("--second-approver-for: %w", err)}
			}
			// An invalid policy refuses to start, naming each problem's
			// file, line and reason.
			if o.http.policy, err = loadPolicy(o.http.secondApproverFor, o.http.policyFiles); err != nil {
				return err
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
	f.StringVar(&o.obs.logFormat, "log-format", "text", "log format on stderr: text or json")
	f.StringVar(&o.obs.logLevel, "log-level", "info", "least level logged: debug, info, warn or error")
	f.BoolVar(&o.obs.printTokenURL, "print-token-url", false,
		"print the sign-in URL with the token on stdout even when stdout is not a terminal; by default a journal or a container log gets the address and how to print the token (studio token) instead")
	f.BoolVar(&o.obs.pprof, "pprof", false, "also serve Go's profiles (net/http/pprof) under /debug/pprof/ on --metrics-addr, without auth")
	f.StringVar(&o.obs.metricsAddr, "metrics-addr", "", "also serve GET /metrics here, without auth, for scrapers (empty: only on --addr, with the token)")
	f.StringVar(&cfg.model, "model", "offline", "the default model: offline, openai, anthropic, script[:PATH], or the name of a --provider entry")
	f.StringArrayVar(&o.app.providers, "provider", nil,
		"one more model conversations may choose: NAME=KIND[,model=M][,base-url=U][,api-key-env=VAR][,context-tokens=N]; repeatable")
	f.DurationVar(&o.grace, "shutdown-grace", coordinator.DefaultShutdownGrace, "how long running turns may finish on shutdown")
	f.IntVar(&o.turn.workers, "workers", coordinator.DefaultWorkers, "turns that talk to the model at once")
	f.IntVar(&o.turn.maxQueued, "max-queued-turns", coordinator.DefaultMaxQueuedTurns, "new turns that may wait for a worker; past it a submission answers 429 rate_limited")
	f.DurationVar(&o.turn.firstEvent, "model-first-event-timeout", coordinator.DefaultFirstEventTimeout, "how long a model attempt may take to send its first event")
	f.DurationVar(&o.turn.idle, "model-idle-timeout", coordinator.DefaultIdleTimeout, "how long a model stream may pause between two events")
	f.DurationVar(&o.turn.attempt, "model-attempt-timeout", coordinator.DefaultAttemptTimeout, "how long one model attempt may take in all")
	f.DurationVar(&o.turn.budget, "model-turn-budget", coordinator.DefaultModelBudget, "how long the model may take in all for one turn (its attempts and the waits between retries): one slow provider cannot hold the workers")
	f.IntVar(&o.app.runWorkers, "run-workers", studio.DefaultWorkers, "playbook runs that execute at once")
	f.DurationVar(&o.app.recoveryWindow, "recovery-window", studio.DefaultRecoveryWindow, "how long a deleted conversation stays recoverable before purge_deleted_conversations may remove it")
	cfg.walAutocheckpoint = new(int)
	f.IntVar(cfg.walAutocheckpoint, "sqlite-wal-autocheckpoint", -1,
		"SQLite: copy the WAL into the database file after a commit that leaves this many pages in it; 0 leaves checkpoints to Litestream (docs/operating.md, \"Continuous replication\"); negative: SQLite's default, 1000")
	addRetentionFlag(f, &keep, "remove conversations not used (no turn, frame or change) for this long, except pinned ones and ones with an active turn: checked at start and hourly, audited")
	f.BoolVar(&o.app.noSeed, "no-seed", false, "do not create the starter playbooks in a new database")
	f.DurationVar(&o.app.proposalTTL, "proposal-ttl", coordinator.DefaultProposalTTL, "how long a proposal waits for confirmation (shown in every proposal)")
	f.DurationVar(&o.app.denialMemory, "denial-memory", coordinator.DefaultDenialMemory,
		"how long a command a person denied is not proposed again in its conversation, unless their own new instruction asks for it; negative: not remembered")
	f.DurationVar(&o.app.textFlush, "text-flush", coordinator.DefaultTextFlush, "how long model text is coalesced before it is stored as a frame (at most 8 KiB either way)")
	f.DurationVar(&o.app.heartbeat, "heartbeat", sse.DefaultHeartbeat, "interval of the comment heartbeats on idle SSE streams")
	f.StringSliceVar(&o.http.secondApproverFor, "second-approver-for", nil,
		"four-eyes: commands of these risks (mutate < execute < admin) or impacts (destructive < irreversible), or above, need a second principal: their author cannot confirm them and a direct command of them is refused, e.g. execute,destructive (default: none)")
	f.IntVar(&o.http.mcpCallsPerMinute, "mcp-calls-per-minute", mcpserver.DefaultCallsPerMinute, "MCP tool calls each principal may make a minute")
	f.IntVar(&o.http.mcpCallBurst, "mcp-call-burst", mcpserver.DefaultCallBurst, "MCP tool calls each principal may make at once")
	f.StringArrayVar(&o.http.policyFiles, "policy", nil,
		"a team's Cedar policies, added to the built-in ones and validated at start (docs/teams.md); repeatable")
	f.StringVar(&o.http.authProxyHeader, "auth-proxy-header", "",
		"sign-in behind a proxy: the header naming the signed-in user, e.g. X-Forwarded-User, believed only from --auth-proxy-trusted (README \"Teams\")")
	f.StringSliceVar(&o.http.authProxyTrusted, "auth-proxy-trusted", nil,
		"the sign-in proxy's addresses (CIDRs or addresses, the TCP peer): the header from anywhere else is refused")
	f.StringVar(&o.http.authProxyGroupsHeader, "auth-proxy-groups-header", "",
		"the header with the user's groups (comma-separated), e.g. X-Forwarded-Groups: then the groups set the role at every sign-in")
	f.StringSliceVar(&o.http.authProxyGroupRoles, "auth-proxy-group-role", nil,
		"GROUP=ROLE, e.g. studio-admins=admin,studio-ops=operator: a user's role is the highest of its mapped groups")
	f.StringVar(&o.http.authProxyDefaultRole, "auth-proxy-default-role", string(protocol.RoleViewer),
		"the role of a user the proxy names for the first time (and, with groups, of one in no mapped group)")
	f.StringSliceVar(&o.http.allowedHosts, "allowed-hosts", nil, "Host header names answered besides loopback, IP addresses and the --addr host (behind a proxy: the public name; *.example.com for subdomains)")
	f.IntVar(&o.http.maxClientConns, "max-client-conns", httpapi.DefaultMaxClientConns, "connections one client address may hold open at once (0: no cap, e.g. behind a proxy)")
	f.IntVar(&o.http.maxConns, "max-conns", httpapi.DefaultMaxConns, "connections the --addr listener holds open at once, all clients together (0: no cap); --metrics-addr holds at most "+strconv.Itoa(httpapi.MetricsMaxConns))
	f.DurationVar(&o.http.bodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout, "how long a request body may take to arrive")
	f.StringVar(&o.webhook.publicURL, "public-url", "", "the cockpit's address as people reach it (https://studio.example.com), for the links in webhook messages (empty: no links)")
	f.DurationVar(&o.webhook.timeout, "webhook-timeout", webhooks.DefaultTimeout, "how long a webhook receiver may take to answer one delivery; a slower one is tried again later")
	f.IntVar(&o.webhook.concurrency, "webhook-concurrency", webhooks.DefaultConcurrency, "webhook deliveries this daemon posts at once")
	f.DurationVar(&o.lease.renew, "lease-renew", lease.DefaultRenew, "how often this daemon renews its lease in StateDB")
	f.DurationVar(&o.lease.expiry, "lease-expiry", lease.DefaultExpiry, "how long a lease lasts unrenewed; then another daemon on the same database ends this daemon's work")
	f.BoolVar(&o.lease.exitOnLoss, "exit-on-lease-loss", false, "exit (status 1) when another daemon took this one's work over, instead of rejoining as a new instance")
	f.DurationVar(&o.lease.outageBudget, "db-outage-budget", coordinator.DefaultOutageBudget, "how long turns and runs retry their writes while the database is unavailable (a restart, a failover) before they fail; and how long a start waits for a database it cannot reach before it exits 1, for the supervisor to start it again")
	f.DurationVar(&o.lease.callTimeout, "db-call-timeout", 0,
		"longest wait for one database call of a turn, a decision or an execution before it is tried again (0: half the --lease-expiry, 1 s to 30 s, on PostgreSQL; 30 s on SQLite)")
	f.DurationVar(&cfg.pg.TCPTimeout, "db-tcp-timeout", postgres.DefaultTCPTimeout,
		"PostgreSQL: how long a connection whose server stopped answering stays open (TCP keepalives and TCP_USER_TIMEOUT), and the connect timeout")
	f.DurationVar(&cfg.pg.LockTimeout, "db-lock-timeout", postgres.DefaultLockTimeout, "PostgreSQL: longest wait for a row lock (lock_timeout); the write is then retried")
	f.DurationVar(&cfg.pg.StatementTimeout, "db-statement-timeout", postgres.DefaultStatementTimeout, "PostgreSQL: longest statement (statement_timeout)")
	f.DurationVar(&cfg.pg.IdleInTransactionTimeout, "db-idle-tx-timeout", postgres.DefaultIdleInTransactionTimeout,
		"PostgreSQL: a session idle inside a transaction this long is ended, with its locks (idle_in_transaction_session_timeout); at most half the --lease-expiry")
	bindEnv(f)
	f.BoolVar(&printCfg, "print-config", false, "print the effective configuration, each value with its source (flag, env, file or default; secrets masked), and exit")
	return cmd
}

// serve runs the daemon until ctx ends or its lease is lost. Each step
// builds one part over those before it (daemonParts's fields); what they
// started stops, in reverse, when serve returns.
func serve(ctx context.Context, cfg *config, log *slog.Logger, o serveOptions) error {
	d := &daemonParts{cfg: cfg, log: log, o: o, errc: make(chan error, 2)}
	defer d.cleanup()
	if err := d.claimDataDir(); err != nil {
		return err
	}
	if err := d.newModelRegistry(); err != nil {
		return err
	}
	if err := d.openStore(ctx); err != nil {
		switch {
		case ctx.Err() != nil: // stopped while waiting for the database
			return nil
		case errors.Is(err, errDatabaseDown):
			return err
		}
		// No in-memory fallback under the same API (docs/design.md §3): every call
		// answers service_failure until the database is fixed and the
		// daemon restarted.
		log.Error("StateDB unavailable: serving service_failure for every API call", "err", err)
		return serveUnavailable(ctx, cfg, log, o.http, d.lock, httpapi.Unavailable(d.edge, err.Error()))
	}
	if err := d.newApplication(ctx); err != nil {
		return err
	}
	d.newCoordinator()
	if err := d.startLease(ctx); err != nil {
		return err
	}
	// From here a failed start ends the lease at once (abort).
	if err := d.startWork(ctx); err != nil {
		return d.abort(err)
	}
	if err := d.newHTTPServers(ctx); err != nil {
		return d.abort(err)
	}
	d.announce()
	d.startWebhooks(ctx)
	return d.run(ctx)
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
