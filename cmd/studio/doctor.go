package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/app"
	"github.com/studio/operator/internal/datadir"
)

// newDoctorCmd is `studio doctor`. It asks the running daemon first, since
// only the daemon knows its model provider, workers and scheduler. When no
// daemon answers it reads the database file directly — read-only checks,
// nothing migrated or changed — because doctor is most needed when the
// daemon is down.
func newDoctorCmd(cfg *config) *cobra.Command {
	var asJSON, local bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the installation: database, model provider, runs, schedules, operator work",
		Long: "Ask the running daemon for its health report (GET /api/app/system/health). When no daemon\n" +
			"answers at --server, open the database in --data-dir directly and check what can be checked\n" +
			"without it. Exits 1 when the report's status is failing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			rep, source, err := doctorReport(cmd.Context(), cfg, local)
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(out, rep); err != nil {
					return err
				}
			} else {
				printDoctor(out, rep, source)
			}
			if rep.Status == app.StatusFailing {
				return errors.New("doctor found failing checks")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.server, "server", envOr("STUDIO_URL", ""), "daemon URL (env STUDIO_URL; default http://<addr>)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&local, "local", false, "do not ask the daemon: read the database file directly")
	return cmd
}

// doctorReport asks the daemon, or reads the database when no daemon
// answers, and adds what in the data directory other users can read.
func doctorReport(ctx context.Context, cfg *config, local bool) (app.DoctorReport, string, error) {
	rep, source, err := healthReport(ctx, cfg, local)
	if err != nil {
		return rep, source, err
	}
	if exposed := datadir.Exposed(cfg.dataDir); len(exposed) > 0 {
		rep.Problems = append(rep.Problems, exposed...)
		if rep.Status == app.StatusOK {
			rep.Status = app.StatusDegraded
		}
	}
	return rep, source, nil
}

// healthReport asks the daemon, or reads the database when no daemon answers.
func healthReport(ctx context.Context, cfg *config, local bool) (app.DoctorReport, string, error) {
	if !local {
		cl, err := operatorClient(cfg)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			rep, err := cl.Doctor(cctx)
			cancel()
			if err == nil {
				return rep, "asked the daemon at " + cl.BaseURL, nil
			}
			var nerr net.Error
			var oerr *net.OpError
			if !errors.As(err, &oerr) && !errors.As(err, &nerr) {
				return app.DoctorReport{}, "", fmt.Errorf("the daemon at %s answered: %w", cl.BaseURL, err)
			}
		}
	}
	rep, err := localDoctor(ctx, cfg)
	return rep, "read " + databaseName(cfg) + " directly: no daemon answered", err
}

// localDoctor checks the database without a daemon. PostgreSQL offers no
// file checks (app.Maintenance): those parts of the report say unavailable.
func localDoctor(ctx context.Context, cfg *config) (app.DoctorReport, error) {
	st, err := openDatabase(ctx, cfg, false)
	if err != nil {
		return app.DoctorReport{}, err
	}
	defer st.Close()
	svc, err := app.New(app.Config{Store: st, Maintenance: st.maint})
	if err != nil {
		return app.DoctorReport{}, err
	}
	rep, err := svc.Doctor(ctx)
	if err != nil {
		return rep, err
	}
	// Without the daemon the model provider and the executor are unknown, not missing.
	rep.Model = app.ModelReport{Error: "not checked: the daemon is not running"}
	rep.Runs.Workers = 0
	rep.Problems = slices.DeleteFunc(rep.Problems, func(p string) bool { return strings.HasPrefix(p, "no model provider") })
	if ms, err := databaseMigrations(cfg); err == nil && rep.Database.SchemaVersion < len(ms) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the database schema is at version %d, this binary's is %d: run studio migrate or start the daemon",
			rep.Database.SchemaVersion, len(ms)))
		if rep.Status == app.StatusOK {
			rep.Status = app.StatusDegraded
		}
	}
	if rep.Status == app.StatusDegraded && len(rep.Problems) == 0 {
		rep.Status = app.StatusOK
	}
	return rep, nil
}

func mib(n *int64) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprintf("%.1f MiB", float64(*n)/(1<<20))
}

func printDoctor(w io.Writer, r app.DoctorReport, source string) {
	fmt.Fprintf(w, "Studio doctor (%s)\n", source)
	fmt.Fprintf(w, "status:     %s\n", r.Status)
	db := r.Database
	fmt.Fprintf(w, "database:   %s, schema version %d, quick check %s, %s (WAL %s), %s free\n",
		db.File, db.SchemaVersion, db.QuickCheck, mib(db.SizeBytes), mib(db.WALBytes), mib(db.FreeBytes))
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
			fmt.Fprintf(w, "  %s  %s  %q  (conversation %s)\n", p.ID, p.CommandType, p.Summary, p.ConversationID)
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
func printCluster(w io.Writer, c app.ClusterReport) {
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
	owners := func(kind string, ws []app.OwnedReport) {
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
