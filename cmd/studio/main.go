// Command studio is the Studio operator daemon and its command-line client:
// `studio serve` runs the cockpit, the application API and the operator
// protocol; `studio operator` talks to a running daemon. This package is
// wiring only: configuration, flags, signals and subcommands.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// config is the daemon's configuration: flags with environment equivalents.
type config struct {
	addr     string
	dataDir  string
	database string // StateDB URL: empty for the SQLite file in dataDir
	model    string
	server   string // operator client: daemon URL
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
	if err := newRoot().Execute(); err != nil {
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	cfg := &config{}
	root := &cobra.Command{
		Use:           "studio",
		Short:         "Studio cockpit daemon with a durable, safe AI operator dock",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&cfg.addr, "addr", envOr("STUDIO_ADDR", "127.0.0.1:8765"), "listen address (env STUDIO_ADDR)")
	pf.StringVar(&cfg.dataDir, "data-dir", envOr("STUDIO_DATA_DIR", defaultDataDir()), "data directory: database and token (env STUDIO_DATA_DIR)")
	pf.StringVar(&cfg.database, "database", envOr("STUDIO_DATABASE_URL", ""), "StateDB: a postgres:// URL, or empty for the SQLite file in --data-dir (env STUDIO_DATABASE_URL)")
	root.AddCommand(newServeCmd(cfg), newMigrateCmd(cfg), newTokenCmd(cfg), newVersionCmd(), newOperatorCmd(cfg), newDoctorCmd(cfg), newBenchCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "studio %s (operator protocol version 1)\n", version)
		},
	}
}
