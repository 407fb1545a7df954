// Command studio is the Studio operator daemon and its command-line client:
// `studio serve` runs the cockpit, the application API and the operator
// protocol; `studio operator` talks to a running daemon. This package is
// wiring only: configuration, flags, signals and subcommands.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/postgres"
)

// config is the daemon's configuration: flags with environment
// equivalents and a config file's keys (config.go).
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
	// configFile is --config: a TOML file of settings.
	configFile string
	// settings is the resolved configuration of the command that runs.
	settings *settings
	// environ is the process's environment (os.Environ; tests set their own).
	environ func() []string
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
	var pending *apiclient.ApprovalPendingError
	if errors.As(err, &pending) {
		// Not an error: the command waits for another approver.
		fmt.Fprintf(os.Stdout, "%v\nAnother principal confirms or denies it: studio approvals\n", pending)
		return exitPending
	}
	fmt.Fprintf(os.Stderr, "studio: %v\n", err)
	if protocol.IsCode(err, protocol.AuthRequired) && cfg.tokenSource != "" {
		fmt.Fprintf(os.Stderr, "The daemon refused the token read from %s: is it this daemon's token (studio token --data-dir DIR)?\n", cfg.tokenSource)
	}
	code := exitCode(err)
	if code == exitUsage && cmd != nil {
		fmt.Fprintf(os.Stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// newRootConfig is the command tree and the configuration its flags fill.
func newRootConfig() (*cobra.Command, *config) {
	cfg := &config{environ: os.Environ}
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
	pf.StringVar(&cfg.addr, "addr", "127.0.0.1:8765", "listen address; clients: where the daemon is")
	pf.StringVar(&cfg.dataDir, "data-dir", defaultDataDir(), "data directory: database and token")
	pf.StringVar(&cfg.database, "database", "", "StateDB: a postgres:// URL, or empty for the SQLite file in --data-dir")
	pf.StringVar(&cfg.server, "server", "", "clients: daemon URL (default http://<addr>)")
	pf.StringVar(&cfg.token, "token", "", "clients: a bearer token, yours (default: the data directory's token file, the owner's)")
	pf.StringVar(&cfg.configFile, "config", "", "a TOML file of settings, its keys the flags' names (shutdown-grace = \"10s\"); a flag wins over its variable, the variable over the file (docs/configuration.md)")
	bindEnv(pf)
	markSecret(pf, "database")
	markSecret(pf, "token")
	readWhereUsed(pf, "token")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		s, err := resolveSettings(root, cmd, cfg.environ())
		if err != nil {
			return usageError{err}
		}
		cfg.settings = s
		return nil
	}
	root.AddCommand(newServeCmd(cfg), newMigrateCmd(cfg), newTokenCmd(cfg), newVersionCmd(), newOperatorCmd(cfg), newDoctorCmd(cfg),
		newRunsCmd(cfg), newPlaybooksCmd(cfg), newWorkflowsCmd(cfg), newSchedulesCmd(cfg), newAuditCmd(cfg), newHealthzCmd(cfg), newBenchCmd(cfg),
		newBackupCmd(cfg), newRestoreCmd(cfg), newPrincipalsCmd(cfg), newTokensCmd(cfg), newWhoamiCmd(cfg), newWebhooksCmd(cfg), newMCPCmd(cfg),
		newApprovalsCmd(cfg), newPolicyCmd(cfg))
	markUsage(root)
	return root, cfg
}
