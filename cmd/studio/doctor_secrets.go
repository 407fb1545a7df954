package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// ActionSecretsRedacted is the audit action of `studio doctor --secrets
// --redact`: its details count what was rewritten, by table and column.
const ActionSecretsRedacted = "studio.system.secrets_redacted"

// doctorSecrets is `studio doctor --secrets [--redact]`: it reads the
// database directly (SQLite or PostgreSQL, a daemon may be running) for
// secrets kept from before the daemon hid them everywhere, by the same
// rules the daemon redacts with, plus what this installation knows by
// value (its token, provider keys, webhook secrets and URLs). Found ones
// exit 1 unless --redact rewrote them.
func doctorSecrets(ctx context.Context, cfg *config, apply bool, o *output, out io.Writer) error {
	st, err := openDatabase(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer st.Close()
	scrubber, ok := st.stateDB.(store.SecretScrubber)
	if !ok {
		return errors.New("this database cannot be scrubbed")
	}
	knowInstallationSecrets(ctx, cfg, st)
	p := store.ScrubSecretsParams{Apply: apply}
	if apply {
		now := time.Now()
		p.Audit = &store.AppendAdminEventParams{Actor: studio.ActorCLI, Action: ActionSecretsRedacted, Now: now}
	}
	rep, err := scrubber.ScrubSecrets(ctx, p)
	if err != nil {
		return err
	}
	if rep.Redacted && st.maint != nil {
		// The old values stay in free pages and the write-ahead log until
		// the file is rebuilt.
		if err := st.maint.Vacuum(ctx); err != nil {
			return fmt.Errorf("secrets redacted, but the vacuum that drops their old pages failed: %w", err)
		}
		if _, err := st.maint.Checkpoint(ctx); err != nil {
			return fmt.Errorf("secrets redacted, but the checkpoint failed: %w", err)
		}
	}
	if err := o.emit(out, rep, func(w io.Writer) { printSecrets(w, rep) }); err != nil {
		return err
	}
	if rep.Rows > 0 && !rep.Redacted {
		return fmt.Errorf("%d stored values hold secrets: run studio doctor --secrets --redact", rep.Rows)
	}
	return nil
}

// knowInstallationSecrets makes the redactor hide this installation's own
// secrets by value: the token file's, the provider keys in the
// environment, the webhooks' signing secrets and URLs.
func knowInstallationSecrets(ctx context.Context, cfg *config, st database) {
	if b, err := os.ReadFile(tokenPath(cfg.dataDir)); err == nil {
		redact.AddKnown(strings.TrimSpace(string(b)))
	}
	for _, env := range os.Environ() {
		name, value, _ := strings.Cut(env, "=")
		if strings.HasSuffix(name, "_API_KEY") || name == "STUDIO_TOKEN" {
			redact.AddKnown(value)
		}
	}
	if list, err := st.ListWebhooks(ctx); err == nil {
		for _, w := range list {
			redact.AddKnown(w.Secret, w.URL)
		}
	}
}

func printSecrets(w io.Writer, rep store.ScrubReport) {
	if rep.Rows == 0 {
		fmt.Fprintln(w, "secrets: none found in the database")
		return
	}
	verb := "hold"
	if rep.Redacted {
		verb = "held (now redacted, audited as " + ActionSecretsRedacted + ")"
	}
	fmt.Fprintf(w, "secrets: %d stored values %s secrets\n", rep.Rows, verb)
	for _, f := range rep.Found {
		fmt.Fprintf(w, "  %-32s %-14s %d\n", f.Table, f.Column, f.Rows)
	}
}
