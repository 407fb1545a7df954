package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/datadir"
	"github.com/studio/operator/internal/studio"
)

// newDoctorCmd is `studio doctor`. It asks the running daemon first, since
// only the daemon knows its model provider, workers and scheduler. When no
// daemon answers it reads the database file directly — read-only checks,
// nothing migrated or changed — because doctor is most needed when the
// daemon is down.
func newDoctorCmd(cfg *config) *cobra.Command {
	var local, secrets, redactFound bool
	var keep retentionFlag
	var o *output
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the installation: daemon, database, model provider, runs, schedules, operator work",
		Long: `Ask the running daemon for its health report (GET /api/app/system/health). When no daemon
answers at --server, open the database in --data-dir directly, print what can be checked without
the daemon, and exit 5: the daemon is down. Exit 1 when the report's status is failing (the daemon
is unhealthy); a degraded report lists its problems and exits 0.`,
		Example: `  studio doctor
  studio doctor -o json | jq .problems
  studio doctor --local          # only the database file, never the daemon
  studio doctor --secrets        # count secrets kept in the database (from before they were hidden)
  studio doctor --secrets --redact   # and hide them, audited`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := o.isJSON(); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if redactFound && !secrets {
				return errors.New("--redact goes with --secrets")
			}
			if secrets {
				return doctorSecrets(cmd.Context(), cfg, redactFound, o, out)
			}
			rep, source, down, err := doctorReport(cmd.Context(), cfg, local, keep.d)
			if err != nil {
				if down != nil {
					return exitError{exitUnreachable, fmt.Errorf("%w; reading the database directly failed too: %v", down, err)}
				}
				return err
			}
			if down != nil {
				// The database may be fine, but the installation is not: no
				// daemon serves it. The report must not say ok.
				rep.Status = studio.StatusFailing
				rep.Problems = append([]string{"the daemon is down: " + down.Error()}, rep.Problems...)
			}
			if err := o.emit(out, rep, func(w io.Writer) { printDoctor(w, rep, source) }); err != nil {
				return err
			}
			switch {
			case down != nil:
				return exitError{exitUnreachable, fmt.Errorf("the daemon is down: %w", down)}
			case rep.Status == studio.StatusFailing && local:
				return errors.New("the database check is failing: " + strings.Join(rep.Problems, "; "))
			case rep.Status == studio.StatusFailing:
				return errors.New("the daemon is unhealthy: " + strings.Join(rep.Problems, "; "))
			}
			return nil
		},
	}
	o = addOutput(cmd)
	cmd.Flags().BoolVar(&local, "local", false, "do not ask the daemon: read the database file directly")
	cmd.Flags().BoolVar(&secrets, "secrets", false,
		"read the database directly for secrets kept in frames, proposals, effects, the search index, audit details, runs and webhook bodies (exit 1 when some are found); see docs/security.md")
	cmd.Flags().BoolVar(&redactFound, "redact", false, "with --secrets: hide what was found (one audited transaction; SQLite is then vacuumed so no old page keeps it)")
	addRetentionFlag(cmd.Flags(), &keep, "read directly (no daemon answering): count what the daemon's retention would remove, as serve --retention")
	return cmd
}

// doctorReport asks the daemon, or reads the database when no daemon
// answers, and adds what in the data directory other users can read; down
// is why the daemon could not be asked (nil when it answered or was not
// asked).
func doctorReport(ctx context.Context, cfg *config, local bool, keep time.Duration) (rep studio.DoctorReport, source string, down, err error) {
	rep, source, down, err = healthReport(ctx, cfg, local, keep)
	if err != nil {
		return rep, source, down, err
	}
	if exposed := datadir.Exposed(cfg.dataDir); len(exposed) > 0 {
		rep.Problems = append(rep.Problems, exposed...)
		if rep.Status == studio.StatusOK {
			rep.Status = studio.StatusDegraded
		}
	}
	return rep, source, down, nil
}

// healthReport asks the daemon, or reads the database when no daemon answers.
func healthReport(ctx context.Context, cfg *config, local bool, keep time.Duration) (rep studio.DoctorReport, source string, down, err error) {
	if !local {
		cl, err := operatorClient(cfg)
		if err != nil {
			down = fmt.Errorf("cannot ask the daemon: %w", err)
			rep, err = localDoctor(ctx, cfg, keep)
			return rep, "read " + databaseName(cfg) + " directly: no token to ask the daemon", down, err
		}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		rep, err := cl.Doctor(cctx)
		cancel()
		if err == nil {
			return rep, "asked the daemon at " + cl.BaseURL, nil, nil
		}
		var unreachable *apiclient.UnreachableError
		if !errors.As(err, &unreachable) {
			return rep, "", nil, fmt.Errorf("the daemon at %s answered: %w", cl.BaseURL, err)
		}
		down = unreachable
	}
	rep, err = localDoctor(ctx, cfg, keep)
	if down != nil {
		source = "read " + databaseName(cfg) + " directly: no daemon answered"
	} else {
		source = "read " + databaseName(cfg) + " directly"
	}
	return rep, source, down, err
}

// localDoctor checks the database without a daemon. PostgreSQL offers no
// file checks (studio.Maintenance): those parts of the report say unavailable.
func localDoctor(ctx context.Context, cfg *config, keep time.Duration) (studio.DoctorReport, error) {
	st, err := openDatabase(ctx, cfg, false)
	if err != nil {
		return studio.DoctorReport{}, err
	}
	defer st.Close()
	shared, _ := usesPostgres(cfg)
	svc, err := studio.New(studio.Config{Store: st, Maintenance: st.maint, Retention: keep, Shared: shared})
	if err != nil {
		return studio.DoctorReport{}, err
	}
	rep, err := svc.Doctor(ctx)
	if err != nil {
		return rep, err
	}
	// Without the daemon the model provider and the executor are unknown, not missing.
	rep.Model = studio.ModelReport{Error: "not checked: the daemon is not running"}
	rep.Runs.Workers = 0
	rep.Problems = slices.DeleteFunc(rep.Problems, func(p string) bool { return strings.HasPrefix(p, "no model provider") })
	if ms, err := databaseMigrations(cfg); err == nil && rep.Database.SchemaVersion < len(ms) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the database schema is at version %d, this binary's is %d: run studio migrate or start the daemon",
			rep.Database.SchemaVersion, len(ms)))
		if rep.Status == studio.StatusOK {
			rep.Status = studio.StatusDegraded
		}
	}
	if rep.Status == studio.StatusDegraded && len(rep.Problems) == 0 {
		rep.Status = studio.StatusOK
	}
	return rep, nil
}

func mib(n *int64) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprintf("%.1f MiB", float64(*n)/(1<<20))
}

// gib is a size in GiB: disk space people compare with what df says.
func gib(n *int64) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprintf("%.1f GiB", float64(*n)/(1<<30))
}

func printDoctor(w io.Writer, r studio.DoctorReport, source string) {
	fmt.Fprintf(w, "Studio doctor (%s)\n", source)
	fmt.Fprintf(w, "status:     %s\n", r.Status)
	db := r.Database
	fmt.Fprintf(w, "database:   %s, schema version %d, quick check %s, %s (WAL %s), %s free\n",
		db.File, db.SchemaVersion, db.QuickCheck, mib(db.SizeBytes), mib(db.WALBytes), gib(db.FreeBytes))
	if rt := db.Retention; rt != nil {
		keep := retentionFlag{time.Duration(rt.AfterSeconds * float64(time.Second))}
		fmt.Fprintf(w, "retention:  conversations unused for %s are removed; %d would be now\n", keep.String(), rt.Removable)
	} else {
		fmt.Fprintf(w, "retention:  off (conversations are kept; serve --retention 90d removes unused ones)\n")
	}
	switch {
	case r.Model.Configured && r.Model.Healthy != nil && !*r.Model.Healthy:
		fmt.Fprintf(w, "model:      %s (configured, not answering: %s)\n", r.Model.Provider, r.Model.Error)
	case r.Model.Configured:
		fmt.Fprintf(w, "model:      %s (configured)\n", r.Model.Provider)
	case r.Model.Error != "":
		fmt.Fprintf(w, "model:      %s\n", r.Model.Error)
	default:
		fmt.Fprintf(w, "model:      none configured\n")
	}
	fmt.Fprintf(w, "runs:       %d queued, %d running", r.Runs.Queued, r.Runs.Running)
	if r.Runs.Workers > 0 {
		fmt.Fprintf(w, " (%d workers)", r.Runs.Workers)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "schedules:  %d enabled (scheduler running: %v)\n", r.Schedules.Enabled, r.Schedules.SchedulerRunning)
	op := r.Operator
	fmt.Fprintf(w, "operator:   %d turns queued, %d running, %d awaiting confirmation\n", op.TurnsQueued, op.TurnsRunning, op.TurnsAwaitingConfirmation)
	if op.IndeterminateTotal == 0 {
		fmt.Fprintf(w, "indeterminate proposals: none\n")
	} else {
		fmt.Fprintf(w, "indeterminate proposals: %d (left executing; reconcile them)\n", op.IndeterminateTotal)
		for _, p := range op.IndeterminateProposals {
			ran := ""
			if p.ExecutedAt != nil {
				ran = "  ran (its execution marker is set: a daemon sharing the database records it executed by itself)"
			}
			fmt.Fprintf(w, "  %s  %s  %q  (conversation %s)%s\n", p.ID, p.CommandType, p.Summary, p.ConversationID, ran)
		}
	}
	printCluster(w, r.Cluster)
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "problems:\n")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
	}
}

// printCluster prints the daemons on the database, their leases and who
// owns the work in flight.
func printCluster(w io.Writer, c studio.ClusterReport) {
	fmt.Fprintf(w, "instances:  %d live, %d expired", c.Live, c.Expired)
	if c.Lease.RenewSeconds > 0 {
		fmt.Fprintf(w, " (lease renewed every %gs, expires after %gs)", c.Lease.RenewSeconds, c.Lease.ExpirySeconds)
	}
	fmt.Fprintln(w)
	for _, in := range c.Instances {
		self := ""
		if in.ID == c.Self {
			self = "  (this daemon)"
		}
		fmt.Fprintf(w, "  %s  %-7s  %s  pid %d  %s  heartbeat %s%s\n", in.ID, in.State, in.Address, in.PID, in.Version,
			time.Unix(0, int64(in.HeartbeatAt*1e9)).UTC().Format(time.RFC3339), self)
	}
	owners := func(kind string, ws []studio.OwnedReport) {
		for _, o := range ws {
			owner := "no owner"
			if o.Owner != "" {
				owner = "owned by " + o.Owner + " (" + o.OwnerState + ")"
			}
			fmt.Fprintf(w, "  %s %s  %s  %s\n", kind, o.ID, o.Status, owner)
		}
	}
	if len(c.Turns)+len(c.Runs) > 0 {
		fmt.Fprintf(w, "work in flight:\n")
		owners("turn", c.Turns)
		owners("run ", c.Runs)
	}
}

// newHealthzCmd is `studio healthz`: the container health check. It asks
// GET /healthz (no token needed) at --server or --addr and exits 0 when the
// daemon answers ok, 1 when it answers otherwise, 5 when nothing answers.
// With --ready it asks GET /readyz instead: ready to take work.
func newHealthzCmd(cfg *config) *cobra.Command {
	var ready bool
	cmd := &cobra.Command{
		Use:   "healthz",
		Short: "Exit 0 when the daemon's /healthz answers ok, or with --ready its /readyz (for health checks and load balancers)",
		Long: `Ask GET /healthz (liveness: the process serves) and exit 0 when it answers ok. With --ready,
ask GET /readyz (readiness: the database answers at this binary's schema, the lease holds on a
shared PostgreSQL database, the daemon is not shutting down) and exit 0 when ready; a daemon that
is not ready exits 1 and prints the reason. Neither needs the token.`,
		Example: `  studio healthz && echo up
  until studio healthz --ready; do sleep 1; done   # after a restart, before sending work`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			base := cfg.server
			if base == "" {
				host, port, err := net.SplitHostPort(cfg.addr)
				if err != nil {
					return usageError{fmt.Errorf("--addr %q: %w", cfg.addr, err)}
				}
				if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
					host = "127.0.0.1"
				}
				base = "http://" + net.JoinHostPort(host, port)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			cl := apiclient.New(base, "", nil)
			path := "/healthz"
			if ready {
				path = "/readyz"
			}
			var h struct {
				Status string `json:"status"`
				Reason string `json:"reason"`
			}
			if err := cl.Do(ctx, http.MethodGet, path, nil, &h); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), h.Status)
			return nil
		},
	}
	cmd.Flags().BoolVar(&ready, "ready", false, "ask /readyz (ready to take work) instead of /healthz (alive)")
	return cmd
}
