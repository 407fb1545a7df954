package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/studio"
)

// The application commands: runs, playbooks and schedules over the
// cockpit's API (/api/app), the same services the operator's tools call.

// appCmd runs fn with a client of the daemon, once the command's -o is
// known good. o points at the command's output, set after the command is
// built (addOutput).
func appCmd(cfg *config, o **output, fn func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cl, err := (*o).operatorClient(cfg)
		if err != nil {
			return err
		}
		return fn(cmd.Context(), cl, cmd.OutOrStdout(), args)
	}
}

// pages collects every page of a list: next returns one page and its cursor.
func pages[T any](ctx context.Context, limit int, next func(q url.Values) ([]T, string, error), q url.Values) ([]T, error) {
	all := []T{}
	for {
		page, cursor, err := next(q)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if cursor == "" || (limit > 0 && len(all) >= limit) {
			if limit > 0 && len(all) > limit {
				all = all[:limit]
			}
			return all, nil
		}
		q.Set("cursor", cursor)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func newRunsCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, watch, show, follow, cancel and retry playbook runs",
		Example: `  studio runs list --status failed
  studio runs show 3f2a...
  studio runs show 3f2a1b9c                 # a unique id prefix will do
  studio runs logs 3f2a1b9c -f
  studio runs list --watch
  studio runs retry 3f2a... -o json`,
	}
	cmd.AddCommand(runsListCmd(cfg), runsShowCmd(cfg), runActionCmd(cfg, "cancel", "Cancel a queued or running run"),
		runActionCmd(cfg, "retry", "Launch a failed or cancelled run again"), runsLogsCmd(cfg))
	return cmd
}

func runsListCmd(cfg *config) *cobra.Command {
	var status, playbook, trigger, since string
	var limit int
	var watch bool
	var interval time.Duration
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List runs, newest first", Args: cobra.NoArgs,
		Example: `  studio runs list
  studio runs list --status failed --since 24h
  studio runs list --playbook audit-repo -o json | jq '.runs[].id'`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			if err := oneOf("status", status, false, runStatusValues...); err != nil {
				return err
			}
			if err := oneOf("trigger", trigger, false, runTriggerValues...); err != nil {
				return err
			}
			q := url.Values{}
			set := func(k, v string) {
				if v != "" {
					q.Set(k, v)
				}
			}
			set("status", status)
			set("playbook", playbook)
			set("trigger", trigger)
			if since != "" {
				s, err := sinceParam("since", since)
				if err != nil {
					return err
				}
				q.Set("since", s)
			}
			list := func(ctx context.Context) ([]studio.Run, error) {
				return pages(ctx, limit, func(q url.Values) ([]studio.Run, string, error) {
					p, err := cl.ListRuns(ctx, q)
					return p.Runs, p.NextCursor, err
				}, maps.Clone(q))
			}
			if watch {
				asJSON, _ := o.isJSON()
				return watchRuns(ctx, out, asJSON, interval, list, runTable)
			}
			runs, err := list(ctx)
			if err != nil {
				return err
			}
			return o.emit(out, studio.RunPage{Runs: runs}, func(w io.Writer) { runTable(w, runs) })
		}),
	}
	o = addOutput(c)
	f := c.Flags()
	f.StringVar(&status, "status", "", "queued, running, succeeded, failed or cancelled")
	f.StringVar(&playbook, "playbook", "", "playbook name or id")
	f.StringVar(&trigger, "trigger", "", "manual, operator or schedule")
	f.StringVar(&since, "since", "", "only runs created since: a duration (24h) or an RFC 3339 time")
	f.IntVar(&limit, "limit", 100, "at most this many runs (0: all)")
	f.BoolVarP(&watch, "watch", "w", false, "print the list again whenever it changes, until Ctrl-C (-o json: one page a line)")
	f.DurationVar(&interval, "interval", 2*time.Second, "how often --watch looks")
	enumFlag(c, "status", false, runStatusValues)
	enumFlag(c, "trigger", false, runTriggerValues)
	_ = c.RegisterFlagCompletionFunc("playbook", completeWith(cfg, playbookNames))
	return c
}

// runTable is the table form of a list of runs.
func runTable(w io.Writer, runs []studio.Run) {
	t := newTable(w, "ID", "STATUS", "PLAYBOOK", "TRIGGER", "CREATED", "DURATION", "ERROR")
	for _, r := range runs {
		t.row(r.ID, r.Status, r.PlaybookName, r.Trigger, ago(r.CreatedAt), durationMs(r.DurationMs), runError(r))
	}
	t.flush()
}

// sinceParam turns "24h" into Unix seconds that long ago; an RFC 3339 time
// passes unchanged.
func sinceParam(flag, v string) (string, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return strconv.FormatInt(time.Now().Add(-d).Unix(), 10), nil
	}
	if _, err := time.Parse(time.RFC3339, v); err == nil {
		return v, nil
	}
	return "", usageError{fmt.Errorf("--%s %q is neither a duration (24h) nor an RFC 3339 time", flag, v)}
}

func durationMs(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return (time.Duration(*ms) * time.Millisecond).String()
}

func runError(r studio.Run) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code + ": " + truncate(r.Error.Message, 60)
}

func runFields(w io.Writer, r studio.Run) {
	kv := []string{"id", r.ID, "status", r.Status, "playbook", fmt.Sprintf("%s (version %d)", r.PlaybookName, r.PlaybookVersion),
		"trigger", r.Trigger, "created", when(r.CreatedAt), "duration", durationMs(r.DurationMs)}
	if r.RetryOf != nil {
		kv = append(kv, "retry of", *r.RetryOf)
	}
	if r.Input != "" {
		kv = append(kv, "input", truncate(r.Input, 200))
	}
	if r.Error != nil {
		kv = append(kv, "error", r.Error.Code+": "+r.Error.Message)
	}
	fields(w, kv...)
	if r.Output != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(r.Output, "\n"))
	}
}

func runsShowCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "show RUN_ID", Short: "Show a run and its output", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, runIDs),
		Example:           `  studio runs show 3f2a...`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			id, err := resolveRun(ctx, cl, args[0])
			if err != nil {
				return err
			}
			r, err := cl.GetRun(ctx, id)
			if err != nil {
				return err
			}
			return o.emit(out, r, func(w io.Writer) { runFields(w, r) })
		}),
	}
	o = addOutput(c)
	return c
}

// runActionCmd is runs cancel and runs retry.
func runActionCmd(cfg *config, action, short string) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: action + " RUN_ID", Short: short, Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, runIDs),
		Example:           "  studio runs " + action + " 3f2a...",
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			do := cl.CancelRun
			if action == "retry" {
				do = cl.RetryRun
			}
			id, err := resolveRun(ctx, cl, args[0])
			if err != nil {
				return err
			}
			r, err := do(ctx, id)
			if err != nil {
				return err
			}
			return o.emit(out, r, func(w io.Writer) { runFields(w, r) })
		}),
	}
	o = addOutput(c)
	return c
}

func newPlaybooksCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "playbooks",
		Short: "List, show, launch, create, edit and delete playbooks",
		Example: `  studio playbooks list
  studio playbooks show audit-repo
  studio playbooks launch audit-repo --arg repo=acme/api`,
	}
	cmd.AddCommand(playbooksListCmd(cfg), playbooksShowCmd(cfg), playbooksLaunchCmd(cfg), playbooksCreateCmd(cfg),
		playbooksEditCmd(cfg), playbooksDeleteCmd(cfg))
	return cmd
}

func playbooksListCmd(cfg *config) *cobra.Command {
	var query string
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List playbooks by name", Args: cobra.NoArgs,
		Example: `  studio playbooks list
  studio playbooks list --query audit -o json`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			q := url.Values{}
			if query != "" {
				q.Set("q", query)
			}
			pbs, err := pages(ctx, 0, func(q url.Values) ([]studio.Playbook, string, error) {
				p, err := cl.ListPlaybooks(ctx, q)
				return p.Playbooks, p.NextCursor, err
			}, q)
			if err != nil {
				return err
			}
			return o.emit(out, studio.PlaybookPage{Playbooks: pbs}, func(w io.Writer) {
				t := newTable(w, "NAME", "VERSION", "ARGS", "UPDATED", "DESCRIPTION")
				for _, p := range pbs {
					names := make([]string, 0, len(p.Args))
					for _, a := range p.Args {
						names = append(names, a.Name)
					}
					t.row(p.Name, strconv.FormatInt(p.Version, 10), strings.Join(names, ","), ago(p.UpdatedAt), truncate(p.Description, 60))
				}
				t.flush()
			})
		}),
	}
	o = addOutput(c)
	c.Flags().StringVarP(&query, "query", "q", "", "only playbooks whose name or description contains this")
	return c
}

func playbooksShowCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "show NAME_OR_ID", Short: "Show a playbook: prompt and declared arguments", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, playbookNames),
		Example:           `  studio playbooks show audit-repo`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			p, err := cl.GetPlaybook(ctx, args[0])
			if err != nil {
				return err
			}
			return o.emit(out, p, func(w io.Writer) { playbookFields(w, p) })
		}),
	}
	o = addOutput(c)
	return c
}

func playbooksLaunchCmd(cfg *config) *cobra.Command {
	var input string
	var argPairs []string
	var o *output
	c := &cobra.Command{
		Use: "launch NAME_OR_ID", Short: "Launch a run of a playbook (queued; follow it with studio runs show)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, playbookNames),
		Example: `  studio playbooks launch audit-repo --arg repo=acme/api
  studio playbooks launch write-release-notes --arg version=1.4.0 -o json`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			cmd := studio.LaunchPlaybookCommand{Playbook: args[0], Input: input}
			var err error
			if cmd.Args, err = argValues(argPairs); err != nil {
				return err
			}
			r, err := cl.LaunchPlaybook(ctx, cmd)
			if err != nil {
				return err
			}
			return o.emit(out, r, func(w io.Writer) { runFields(w, r) })
		}),
	}
	o = addOutput(c)
	c.Flags().StringVar(&input, "input", "", "what the run works on")
	c.Flags().StringArrayVar(&argPairs, "arg", nil, "an argument NAME=VALUE (repeatable)")
	return c
}

func newSchedulesCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "List, show, create, edit, delete, pause and resume schedules",
		Example: `  studio schedules list
  studio schedules edit nightly-audit --cron "0 4 * * *"
  studio schedules pause nightly-audit
  studio schedules resume nightly-audit`,
	}
	cmd.AddCommand(schedulesListCmd(cfg), schedulesShowCmd(cfg), schedulesCreateCmd(cfg), schedulesEditCmd(cfg), schedulesDeleteCmd(cfg),
		scheduleEnableCmd(cfg, false), scheduleEnableCmd(cfg, true))
	return cmd
}

func schedulesListCmd(cfg *config) *cobra.Command {
	var enabled string
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List schedules by name", Args: cobra.NoArgs,
		Example: `  studio schedules list
  studio schedules list --enabled true -o json`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			if err := oneOf("enabled", enabled, false, boolValues...); err != nil {
				return err
			}
			q := url.Values{}
			if enabled != "" {
				q.Set("enabled", enabled)
			}
			scs, err := pages(ctx, 0, func(q url.Values) ([]studio.Schedule, string, error) {
				p, err := cl.ListSchedules(ctx, q)
				return p.Schedules, p.NextCursor, err
			}, q)
			if err != nil {
				return err
			}
			return o.emit(out, studio.SchedulePage{Schedules: scs}, func(w io.Writer) { scheduleTable(w, scs) })
		}),
	}
	o = addOutput(c)
	c.Flags().StringVar(&enabled, "enabled", "", "true or false (default both)")
	enumFlag(c, "enabled", false, boolValues)
	return c
}

func scheduleTable(w io.Writer, scs []studio.Schedule) {
	t := newTable(w, "NAME", "ENABLED", "CRON (UTC)", "PLAYBOOK", "NEXT RUN", "LAST RUN", "SKIPPED")
	for _, s := range scs {
		next, last := "-", "-"
		if s.NextRunAt != nil && s.Enabled {
			next = when(*s.NextRunAt)
		}
		if s.LastRunAt != nil {
			last = when(*s.LastRunAt)
		}
		t.row(s.Name, strconv.FormatBool(s.Enabled), s.Cron, s.PlaybookName, next, last, strconv.FormatInt(s.SkippedRuns, 10))
	}
	t.flush()
}

// scheduleEnableCmd is schedules pause (enabled false) and resume (true).
func scheduleEnableCmd(cfg *config, enabled bool) *cobra.Command {
	use, short := "pause", "Pause a schedule: it launches nothing until resumed"
	if enabled {
		use, short = "resume", "Resume a paused schedule"
	}
	var o *output
	c := &cobra.Command{
		Use: use + " NAME_OR_ID", Short: short, Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, scheduleNames),
		Example:           "  studio schedules " + use + " nightly-audit",
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			s, err := cl.SetScheduleEnabled(ctx, args[0], enabled)
			if err != nil {
				return err
			}
			return o.emit(out, s, func(w io.Writer) { scheduleTable(w, []studio.Schedule{s}) })
		}),
	}
	o = addOutput(c)
	return c
}
