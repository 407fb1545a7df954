package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The webhook commands, over the admin API (/api/admin/webhooks) with the
// client's token.

func newWebhooksCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Add, list and remove signed webhooks, and see their deliveries (admin)",
		Example: `  studio webhooks add https://hooks.example.com/studio --events proposal.pending,proposal.decided
  studio webhooks add https://hooks.slack.com/services/T/B/X --events proposal.pending,run.failed --format slack
  studio webhooks list
  studio webhooks deliveries wh_3f2a...
  studio webhooks remove wh_3f2a...`,
	}
	cmd.AddCommand(webhooksAddCmd(cfg), webhooksListCmd(cfg), webhooksRemoveCmd(cfg), webhooksDeliveriesCmd(cfg))
	return cmd
}

func webhookTable(w io.Writer, hs []protocol.Webhook) {
	t := newTable(w, "ID", "URL", "EVENTS", "FORMAT", "CREATED", "BY")
	for _, h := range hs {
		t.row(h.ID, h.URL, strings.Join(h.Events, ","), h.Format, ago(h.CreatedAt), h.CreatedBy)
	}
	t.flush()
}

func webhooksAddCmd(cfg *config) *cobra.Command {
	var events []string
	var format string
	var o *output
	c := &cobra.Command{
		Use: "add URL --events EVENT[,EVENT]", Short: "Add a webhook; its signing secret is shown this once", Args: cobra.ExactArgs(1),
		Example: "  studio webhooks add https://hooks.example.com/studio --events proposal.pending,proposal.decided,turn.failed,run.failed",
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			for _, e := range events {
				if !store.ValidWebhookEvent(e) {
					return usageError{fmt.Errorf("--events: %q is not one of %s", e, strings.Join(store.WebhookEvents, ", "))}
				}
			}
			if format != string(store.FormatStandard) && format != string(store.FormatSlack) {
				return usageError{fmt.Errorf("--format: %q is not standard or slack", format)}
			}
			h, err := cl.CreateWebhook(ctx, protocol.CreateWebhookRequest{URL: args[0], Events: events, Format: format})
			if err != nil {
				return err
			}
			return o.emit(out, h, func(w io.Writer) {
				fmt.Fprintln(w, h.Secret)
				fmt.Fprintf(w, "# webhook %s: its signing secret, shown this once; give it to the receiver to verify webhook-signature\n", h.Webhook.ID)
			})
		}),
	}
	o = addOutput(c)
	c.Flags().StringSliceVar(&events, "events", nil, "events to deliver: "+strings.Join(store.WebhookEvents, ", ")+" (required)")
	c.Flags().StringVar(&format, "format", string(store.FormatStandard), "body: standard (signed JSON event) or slack ({\"text\": ...} for a Slack incoming webhook)")
	_ = c.MarkFlagRequired("events")
	return c
}

func webhooksListCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List the webhooks (never their secrets)", Args: cobra.NoArgs,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			hs, err := cl.ListWebhooks(ctx)
			if err != nil {
				return err
			}
			return o.emit(out, map[string]any{"webhooks": hs}, func(w io.Writer) { webhookTable(w, hs) })
		}),
	}
	o = addOutput(c)
	return c
}

func webhooksRemoveCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "remove ID", Short: "Remove a webhook: no new deliveries, and its pending ones fail", Args: cobra.ExactArgs(1),
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			h, err := cl.RemoveWebhook(ctx, args[0])
			if err != nil {
				return err
			}
			return o.emit(out, map[string]any{"webhook": h}, func(w io.Writer) { fmt.Fprintf(w, "removed webhook %s (%s)\n", h.ID, h.URL) })
		}),
	}
	o = addOutput(c)
	return c
}

func webhooksDeliveriesCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "deliveries ID", Short: "A webhook's recent deliveries, newest first", Args: cobra.ExactArgs(1),
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			ds, err := cl.ListDeliveries(ctx, args[0])
			if err != nil {
				return err
			}
			return o.emit(out, map[string]any{"deliveries": ds}, func(w io.Writer) {
				t := newTable(w, "ID", "EVENT", "STATUS", "ATTEMPTS", "LAST", "CREATED", "NEXT / DELIVERED", "ERROR")
				for _, d := range ds {
					last, at := "-", "-"
					if d.LastStatus != 0 {
						last = strconv.Itoa(d.LastStatus)
					}
					if d.DeliveredAt != nil {
						at = ago(*d.DeliveredAt)
					} else if d.NextAttemptAt != nil {
						at = "next " + when(*d.NextAttemptAt)
					}
					t.row(d.ID, d.Event, d.Status, strconv.Itoa(d.Attempts), last, ago(d.CreatedAt), at, d.LastError)
				}
				t.flush()
			})
		}),
	}
	o = addOutput(c)
	return c
}
