// Command studio is the Studio operator daemon and its command-line client:
// `studio serve` runs the cockpit, the application API and the operator
// protocol; `studio operator` talks to a running daemon. This package is
// wiring only: configuration, flags, signals and subcommands.
package main

import (
	"errors"
	"fmt"
	"github.com/studio/operator/internal/store/postgres"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/protocol"
)

// config is the daemon's configuration: flags with environment equivalents.
type config struct {
	addr     string
	dataDir  string
	database string // StateDB URL: empty for the SQLite file in dataDir
	model    string
	server   string // operator client: daemon URL
	// tokenSource is where a client read its token (said when refused).
	tokenSource string
	token       string // clients: --token (else STUDIO_TOKEN, else the token file)
	// pg tunes the PostgreSQL connections (serve's --db-* flags).
	pg postgres.Options
	// walAutocheckpoint is serve's --sqlite-wal-autocheckpoint: pages, 0
	// off (Litestream checkpoints); nil or negative: SQLite's default.
	walAutocheckpoint *int
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// envInt is the integer in the environment variable key, else def (also
// when it does not parse: the flag's own parsing is for the command line).
func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return n
	}
	return def
}

// defaultDataDir is $XDG_STATE_HOME/studio, else ~/.local/state/studio.
func defaultDataDir() string {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "studio")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(".", ".studio")
	}
	return filepath.Join(home, ".local", "state", "studio")
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the exit code; errors go to
// stderr, once, with a pointer to --help for usage mistakes.
func run(args []string) int {
	root, cfg := newRootConfig()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(os.Stderr, "studio: %v\n", err)
	if protocol.IsCode(err, protocol.AuthRequired) && cfg.tokenSource != "" {
		fmt.Fprintf(os.Stderr, "The daemon refused the token read from %s: is it this daemon's token (studio token --data-dir DIR)?\n", cfg.tokenSource)
	}
	code := exitCode(err)
	var unknown unknownCommandError
	if errors.As(err, &unknown) && cmd != nil {
		fmt.Fprint(os.Stderr, "\n"+cmd.UsageString())
	} else if code == exitUsage && cmd != nil {
		fmt.Fprintf(os.Stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// newRootConfig is the command tree and the configuration its flags fill.
func newRootConfig() (*cobra.Command, *config) {
	cfg := &config{}
	root := &cobra.Command{
		Use:   "studio",
		Short: "Studio cockpit daemon with a durable, safe AI operator dock",
		Long: "studio runs the Studio cockpit daemon (studio serve) and talks to a running one: the operator\n" +
			"protocol (studio operator), the application's runs, playbooks and schedules, and health (studio doctor).\n\n" +
			exitCodesHelp,
		Example: `  studio serve                                 # the daemon on 127.0.0.1:8765
  studio operator send "show the failed runs"  # talk to the operator
  studio runs list --status failed -o json     # scriptable output
  studio doctor || echo "daemon down or unhealthy: exit $?"`,
		Version:       buildInfo().Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate(versionLine() + "\n")
	pf := root.PersistentFlags()
	pf.StringVar(&cfg.addr, "addr", envOr("STUDIO_ADDR", "127.0.0.1:8765"), "listen address; clients: where the daemon is (env STUDIO_ADDR)")
	pf.StringVar(&cfg.dataDir, "data-dir", envOr("STUDIO_DATA_DIR", defaultDataDir()), "data directory: database and token (env STUDIO_DATA_DIR)")
	pf.StringVar(&cfg.database, "database", envOr("STUDIO_DATABASE_URL", ""), "StateDB: a postgres:// URL, or empty for the SQLite file in --data-dir (env STUDIO_DATABASE_URL)")
	pf.StringVar(&cfg.server, "server", envOr("STUDIO_URL", ""), "clients: daemon URL (env STUDIO_URL; default http://<addr>)")
	pf.StringVar(&cfg.token, "token", "", "clients: a bearer token, yours (default env STUDIO_TOKEN, else the data directory's token file: the owner's)")
	root.AddCommand(newServeCmd(cfg), newMigrateCmd(cfg), newTokenCmd(cfg), newVersionCmd(), newOperatorCmd(cfg), newDoctorCmd(cfg),
		newRunsCmd(cfg), newPlaybooksCmd(cfg), newWorkflowsCmd(cfg), newSchedulesCmd(cfg), newAuditCmd(cfg), newHealthzCmd(cfg), newBenchCmd(cfg),
		newBackupCmd(cfg), newRestoreCmd(cfg), newPrincipalsCmd(cfg), newTokensCmd(cfg), newWhoamiCmd(cfg), newWebhooksCmd(cfg), newMCPCmd(cfg), newPolicyCmd(cfg))
	markUsage(root)
	return root, cfg
}
