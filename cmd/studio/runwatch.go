package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/studio"
)

// Following runs: runs logs -f and runs list --watch poll the application
// API (a running run's output is saved as it grows, at least every 500 ms)
// until the run ends or the user presses Ctrl-C, which ends them cleanly.

// pollEvery waits d or until ctx ends; false when ctx ended.
func pollEvery(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func runsLogsCmd(cfg *config) *cobra.Command {
	var follow bool
	var interval time.Duration
	var o *output
	c := &cobra.Command{
		Use: "logs RUN_ID", Short: "Print a run's output; -f follows it until the run ends", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, runIDs),
		Long: "logs prints the output a run has produced so far. With -f it keeps printing what the run adds until\n" +
			"the run ends, then says how it ended on stderr; a run that failed or was cancelled exits 1.\n" +
			"With -o json each piece of output is a JSON line {\"runId\", \"status\", \"output\"}.",
		Example: `  studio runs logs 3f2a1b9c
  studio runs logs 3f2a1b9c -f`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			asJSON, _ := o.isJSON()
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
			defer stop()
			id, err := resolveRun(ctx, cl, args[0])
			if err != nil {
				return err
			}
			printed := ""
			for {
				r, err := cl.GetRun(ctx, id)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				if r.Output != printed {
					piece := r.Output
					if strings.HasPrefix(r.Output, printed) {
						piece = r.Output[len(printed):]
					}
					printed = r.Output
					if asJSON {
						if err := printJSONLine(out, map[string]string{"runId": r.ID, "status": r.Status, "output": piece}); err != nil {
							return err
						}
					} else {
						fmt.Fprint(out, piece)
					}
				}
				ended := studio.RunEnded(r)
				if !follow || ended {
					if !asJSON && printed != "" && !strings.HasSuffix(printed, "\n") {
						fmt.Fprintln(out)
					}
					if follow {
						return runOutcome(r)
					}
					return nil
				}
				if !pollEvery(ctx, interval) {
					return nil
				}
			}
		}),
	}
	o = addOutput(c)
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing the output until the run ends")
	c.Flags().DurationVar(&interval, "interval", 500*time.Millisecond, "how often -f looks for more output")
	return c
}

// runOutcome is a followed run's end: nil when it succeeded.
func runOutcome(r studio.Run) error {
	if r.Status == "succeeded" {
		return nil
	}
	msg := fmt.Sprintf("run %s %s", r.ID, r.Status)
	if r.Error != nil {
		msg += ": " + r.Error.Code + ": " + r.Error.Message
	}
	return errors.New(msg)
}

// printJSONLine writes v as one compact JSON line, times in RFC 3339.
func printJSONLine(w io.Writer, v any) error {
	b, err := marshalOutput(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// watchRuns prints the runs list again each time it changes, until
// Ctrl-C: a table headed by the time, or one JSON page a line.
func watchRuns(ctx context.Context, out io.Writer, asJSON bool, interval time.Duration, list func(context.Context) ([]studio.Run, error), table func(io.Writer, []studio.Run)) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	last := ""
	for {
		runs, err := list(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		b, err := marshalOutput(studio.RunPage{Runs: runs})
		if err != nil {
			return err
		}
		if string(b) != last {
			last = string(b)
			if asJSON {
				fmt.Fprintln(out, last)
			} else {
				fmt.Fprintf(out, "%s\n", time.Now().UTC().Format(time.RFC3339))
				table(out, runs)
				fmt.Fprintln(out)
			}
		}
		if !pollEvery(ctx, interval) {
			return nil
		}
	}
}
