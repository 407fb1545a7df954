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

// clientToken is the token a client uses: STUDIO_TOKEN, else the data dir's file.
func clientToken(dataDir string) (string, error) {
	if t := os.Getenv("STUDIO_TOKEN"); t != "" {
		return t, nil
	}
	b, err := os.ReadFile(tokenPath(dataDir))
	if err != nil {
		return "", fmt.Errorf("no token: set STUDIO_TOKEN or start the daemon once with this --data-dir (%w)", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func newTokenCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Print the bearer token (created on first start)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
}
