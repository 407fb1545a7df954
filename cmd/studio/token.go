package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// tokenPath is where the daemon keeps its bearer token.
func tokenPath(dataDir string) string { return filepath.Join(dataDir, "token") }

// loadOrCreateToken reads the token file, creating it (32 random bytes, mode
// 0600) on first start. The file appears whole or not at all (written
// aside, then linked into place): daemons that share a data directory and
// start together read one token.
func loadOrCreateToken(dataDir string) (string, error) {
	path := tokenPath(dataDir)
	if b, err := os.ReadFile(path); err == nil {
		t := strings.TrimSpace(string(b))
		if len(t) < 32 {
			return "", fmt.Errorf("token file %s is too short; delete it to make a new one", path)
		}
		return t, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read token: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	t := base64.RawURLEncoding.EncodeToString(raw[:])
	f, err := os.CreateTemp(dataDir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process won the race
			return loadOrCreateToken(dataDir)
		}
		return "", fmt.Errorf("create token: %w", err)
	}
	return t, nil
}

// clientToken is the token a client uses: STUDIO_TOKEN, else the data
// dir's file. It records in cfg where it read the token, for the message
// of a refused one.
func clientToken(cfg *config) (string, error) {
	if t := os.Getenv("STUDIO_TOKEN"); t != "" {
		cfg.tokenSource = "the STUDIO_TOKEN environment variable"
		return t, nil
	}
	path := tokenPath(cfg.dataDir)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("no token: set STUDIO_TOKEN or start the daemon once with this --data-dir (%w)", err)
	}
	cfg.tokenSource = path
	return strings.TrimSpace(string(b)), nil
}

// hasDaemonState reports whether dataDir holds a daemon's state: its
// SQLite database or its token.
func hasDaemonState(dataDir string) bool {
	for _, p := range []string{dbPath(dataDir), tokenPath(dataDir)} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

func newTokenCmd(cfg *config) *cobra.Command {
	var create bool
	c := &cobra.Command{
		Use:   "token",
		Short: "Print the bearer token (the daemon creates it on first start)",
		Long: "token prints the bearer token of the daemon whose data directory is --data-dir. A directory\n" +
			"without a daemon's state (no token, no database) is an error, most likely a wrong --data-dir;\n" +
			"--create makes the token there anyway, before the daemon's first start.",
		Example: `  studio token
  studio token --data-dir /var/lib/studio
  studio token --data-dir /var/lib/studio --create   # before the first start`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !create && !hasDaemonState(cfg.dataDir) {
				return fmt.Errorf("no daemon state in %s (no token, no database): is --data-dir right? "+
					"Start `studio serve --data-dir %s` once, or use --create to make a token there now", cfg.dataDir, cfg.dataDir)
			}
			if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
				return err
			}
			t, err := loadOrCreateToken(cfg.dataDir)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), t)
			return nil
		},
	}
	c.Flags().BoolVar(&create, "create", false, "create the token if the data directory has none")
	return c
}
