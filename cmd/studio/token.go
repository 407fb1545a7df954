package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/httpapi"
)

// tokenPath is where the daemon keeps its bearer token.
func tokenPath(dataDir string) string { return filepath.Join(dataDir, "token") }

// loadOrCreateToken reads the token file, creating it (a stu_ token like
// every principal's, mode 0600) on first start. The file appears whole or
// not at all (written aside, then linked into place): daemons that share a
// data directory and start together read one token. A file from before
// stu_ tokens (32 random bytes, base64) keeps working as it is, until
// `studio token --rotate`.
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
	t := httpapi.NewToken()
	aside, err := writeAside(dataDir, t)
	if err != nil {
		return "", err
	}
	defer os.Remove(aside)
	if err := os.Link(aside, path); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process won the race
			return loadOrCreateToken(dataDir)
		}
		return "", fmt.Errorf("create token: %w", err)
	}
	return t, nil
}

// writeAside writes token to a new file (mode 0600) in dir, synced, and
// returns its path: the caller links or renames it into place.
func writeAside(dir, token string) (string, error) {
	f, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	if _, err = f.WriteString(token + "\n"); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write token: %w", err)
	}
	return f.Name(), nil
}

// legacyToken reports whether t is a token file's token from before stu_
// tokens: it works, but a secret scanner does not recognise it.
func legacyToken(t string) bool { return !strings.HasPrefix(t, httpapi.TokenPrefix) }

// rotateToken replaces the token file's token through the running daemon,
// as its principal (the owner, an admin): a new stu_ token is made, the
// file replaced with it, then the old token revoked, on every daemon
// sharing the database. Should it stop half-way, the old token is still
// listed (studio tokens list) and is revoked by its id.
func rotateToken(ctx context.Context, cfg *config, w io.Writer) (string, error) {
	path := tokenPath(cfg.dataDir)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("no token file to rotate: %w", err)
	}
	old := strings.TrimSpace(string(b))
	server := cfg.server
	if server == "" {
		server = "http://" + cfg.addr
	}
	cl := apiclient.New(server, old, nil)
	cl.UserAgent = httpapi.CLIUserAgent + readVersion().Version
	who, err := cl.Whoami(ctx)
	if err != nil {
		return "", fmt.Errorf("the token is rotated through the running daemon (%s), which answered: %w", server, err)
	}
	tokens, err := cl.ListTokens(ctx, who.ID)
	if err != nil {
		return "", err
	}
	var oldID string
	for _, t := range tokens {
		if t.RevokedAt == nil && t.Prefix == httpapi.TokenDisplayPrefix(old) {
			oldID = t.ID
		}
	}
	if oldID == "" {
		return "", fmt.Errorf("the token file's token is not among %s's tokens; nothing was changed", who.Name)
	}
	nt, err := cl.CreateToken(ctx, who.ID, "")
	if err != nil {
		return "", err
	}
	aside, err := writeAside(cfg.dataDir, nt.Token)
	if err != nil {
		return "", fmt.Errorf("%w; the new token %s was made but not saved: revoke it with studio tokens revoke %s", err, nt.ID, nt.ID)
	}
	if err := os.Rename(aside, path); err != nil {
		os.Remove(aside)
		return "", fmt.Errorf("replace %s: %w; the new token %s was made but not saved: revoke it with studio tokens revoke %s", path, err, nt.ID, nt.ID)
	}
	if _, err := cl.RevokeToken(ctx, oldID); err != nil {
		return "", fmt.Errorf("%s holds the new token, but the old one (%s) could not be revoked: %w; revoke it with studio tokens revoke %s", path, oldID, err, oldID)
	}
	fmt.Fprintf(w, "# %s: the token of %s is rotated; the old one (%s) is revoked on every daemon\n", path, who.Name, oldID)
	return nt.Token, nil
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
	var create, rotate bool
	c := &cobra.Command{
		Use:   "token",
		Short: "Print the bearer token (the daemon creates it on first start)",
		Long: "token prints the bearer token of the daemon whose data directory is --data-dir. A directory\n" +
			"without a daemon's state (no token, no database) is an error, most likely a wrong --data-dir;\n" +
			"--create makes the token there anyway, before the daemon's first start.\n" +
			"--rotate replaces it, through the running daemon (--addr or --server), with a new stu_ token\n" +
			"and revokes the old one; a token file from before stu_ tokens keeps working until then.",
		Example: `  studio token
  studio token --data-dir /var/lib/studio
  studio token --data-dir /var/lib/studio --create   # before the first start
  studio token --data-dir /var/lib/studio --rotate   # the daemon is running`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rotate {
				if create {
					return usageError{errors.New("--rotate replaces the token; --create makes a first one: not both")}
				}
				t, err := rotateToken(cmd.Context(), cfg, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), t)
				return nil
			}
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
	c.Flags().BoolVar(&rotate, "rotate", false, "replace the token with a new one through the running daemon, and revoke the old one")
	return c
}
