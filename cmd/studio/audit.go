package main

import (
	"context"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/studio"
)

// The audit command: the append-only trail over /api/app/audit, filtered
// on the server.

// auditActors are the actors the trail names.
var auditActors = []string{studio.ActorCockpit, studio.ActorCLI, studio.ActorOperator, studio.ActorScheduler, studio.ActorSystem}

func newAuditCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit trail",
		Example: `  studio audit list --since 24h
  studio audit list --actor studio_operator --command-type launch_playbook -o json`,
	}
	cmd.AddCommand(auditListCmd(cfg))
	return cmd
}

func auditListCmd(cfg *config) *cobra.Command {
	var action, actor, commandType, target, targetID, since, until string
	var limit int
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List audit events newest first, filtered on the server", Args: cobra.NoArgs,
		Example: `  studio audit list
  studio audit list --target 3f2a...            # a resource's or proposal's events
  studio audit list --action studio.app.command --since 2026-01-01T00:00:00Z --until 24h`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"action": action, "actor": actor, "commandType": commandType, "target": target, "targetId": targetID} {
				if v != "" {
					q.Set(k, v)
				}
			}
			for k, v := range map[string]string{"since": since, "until": until} {
				if v == "" {
					continue
				}
				s, err := sinceParam(k, v)
				if err != nil {
					return err
				}
				q.Set(k, s)
			}
			events, err := pages(ctx, limit, func(q url.Values) ([]studio.AuditEvent, string, error) {
				p, err := cl.ListAudit(ctx, q)
				return p.Events, p.NextCursor, err
			}, q)
			if err != nil {
				return err
			}
			return o.emit(out, studio.AuditPage{Events: events}, func(w io.Writer) {
				t := newTable(w, "ID", "TIME", "ACTOR", "ACTION", "TARGET", "DETAILS")
				for _, e := range events {
					t.row(strconv.FormatInt(e.ID, 10), when(e.CreatedAt), e.Actor, e.Action, orDash(e.TargetID), truncate(string(e.Details), 80))
				}
				t.flush()
			})
		}),
	}
	o = addOutput(c)
	f := c.Flags()
	f.StringVar(&action, "action", "", "only this action (for example studio.app.command)")
	f.StringVar(&actor, "actor", "", "only this actor: a principal's name, or one of the daemon's own: "+strings.Join(auditActors, ", "))
	f.StringVar(&commandType, "command-type", "", "only this command type (for example launch_playbook)")
	f.StringVar(&target, "target", "", "the row's target id, or a resource or proposal id its details name")
	f.StringVar(&targetID, "target-id", "", "only rows whose target id is exactly this")
	f.StringVar(&since, "since", "", "from: a duration ago (24h) or an RFC 3339 time")
	f.StringVar(&until, "until", "", "before: a duration ago (1h) or an RFC 3339 time")
	f.IntVar(&limit, "limit", 100, "at most this many events (0: all)")
	return c
}
