package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/bench"
)

// newBenchCmd is `studio bench`. It is long because it is the command's
// flag table; the measurements are internal/bench.
func newBenchCmd(cfg *config) *cobra.Command {
	o := bench.Options{}
	var jsonOut, quick bool
	var clients string
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure durable appends, stream latency, idle-stream memory and replay against this disk's fsync rate",
		Long: `bench measures, on this machine:
  - the write+fsync rate of a file in the bench directory, and one pair's p50/p99/p999: the physical limits;
  - durable frame appends/s by 1, 10, 100 and 1 000 concurrent conversations (store, group commit);
  - frame -> client latency (p50/p99/p999) and delivered frames/s over SSE: at 100, 1 000 and
    10 000 streams (10 per conversation, small frames); 100 conversations x 1 stream with 8 KiB
    frames; 1 conversation -> 100 streams; and 1 000 streams offered far more than they can take
    (saturation);
  - token -> screen latency with the text coalescing interval (--text-flush of serve);
  - memory (RSS, and Go heap+stacks) per idle stream at --idle streams, and store reads while idle;
  - replay of a --replay-frame conversation: the store read alone, and over SSE (three passes of each,
    interleaved; the best of each, and the CPU per frame of the client and of the daemon).
With --database postgres://… (the flag only, not STUDIO_DATABASE_URL) the appends and the daemons
run on that PostgreSQL database, which bench writes to: give it a throwaway one. PostgreSQL's own
commit rate is measured beside them (single-row INSERTs, each committed with synchronous_commit on,
by 1 connection and by the store's pool of connections), and the appends are reported against it;
a second daemon on the database times frames committed by the first to its own streams
(--cross-daemon, a latency run).
It starts a daemon of its own (this binary, "serve", script model) on a loopback port, stops
it when done, and removes its directory unless --keep. With --centrifugo PATH it also runs
Centrifugo v6 (memory engine, history on; build it with
go install github.com/centrifugal/centrifugo/v6@v6.9.1) and repeats each frame latency run
against it, in the same run, the way its users run it: the same streams (uni_sse, one channel
per conversation) and the frames/s the daemon was offered, each published by a call of its own
to its HTTP API stamped just before the call, publish -> client timed. Both servers' streams
are read by clients in a process of their own ("studio bench clients", this binary), apart
from both servers and from the publishers. For the comparison its users make, one stream per
conversation: --latency 1000@2000/1 --duration 15s --centrifugo PATH.

A latency run (--latency, repeatable or comma-separated) is STREAMS@FRAMES_PER_SECOND[/PER_CONV][xBYTES]:
STREAMS streams, PER_CONV of them on each conversation (default 10), and a turn on every
conversation whose model emits FRAMES_PER_SECOND tokens per second in all, each token padded to
BYTES bytes of text (default: its 21-byte time stamp alone). The script steps by whole
milliseconds; a token of 8 KiB or more is a frame of its own, smaller tokens of one step share a
frame (the daemon coalesces for 0.2 ms), so one conversation carries at most about 1 000 small
frames/s, each committed before the next. A run lasts --warm-up (on the daemon: or until its
turns are all submitted, if that is later), then --duration, which alone is measured (turns
still running then are cancelled); delivered rates fall below the offered ones when the daemon
(or this machine) saturates.`,
		Example: `  studio bench --quick
  studio bench --json --latency 1000@2000,100@20000/1x8192,100@1000/100 > run.json
  studio bench --json --conversations 1 --latency 1000@2000/1 --duration 15s --centrifugo ~/go/bin/centrifugo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The flag only: bench writes to the database, so a
			// STUDIO_DATABASE_URL meant for a daemon must not select it.
			if f := cmd.Flag("database"); f != nil && f.Changed {
				o.Database = cfg.database
			}
			if quick {
				o.Duration = min(o.Duration, 3*time.Second)
				o.WarmUp = min(o.WarmUp, time.Second)
			}
			o.ClientsInProcess = clients == "in-process"
			if !o.ClientsInProcess && clients != "process" {
				return fmt.Errorf("--clients %q: want process or in-process", clients)
			}
			res, err := bench.Run(cmd.Context(), o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			bench.Print(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Dir, "dir", "", "directory for the bench's databases (default: a new one in the system's temporary directory; it must be on the disk you mean to measure)")
	f.BoolVar(&o.Keep, "keep", false, "keep the bench directory (databases, daemon log)")
	f.BoolVar(&jsonOut, "json", false, "print the results as JSON instead of a table")
	f.BoolVar(&quick, "quick", false, "short runs (3 s each), for a first look")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "length of each timed run")
	f.IntSliceVar(&o.Conversations, "conversations", []int{1, 10, 100, 1000}, "concurrent conversations appending")
	f.StringSliceVar(&o.Latency, "latency", bench.DefaultLatencyRuns, "latency runs: STREAMS@FRAMES_PER_SECOND[/PER_CONV][xBYTES]; left out, PER_CONV is 10 and tokens are unpadded")
	f.IntVar(&o.Idle, "idle", 10000, "idle streams for the memory measurement")
	f.IntVar(&o.Replay, "replay", 100000, "frames of the replayed conversation")
	f.DurationVar(&o.TextFlush, "text-flush", 50*time.Millisecond, "the daemon's text coalescing interval for the token -> screen run (0: no token -> screen run)")
	f.StringVar(&o.Centrifugo, "centrifugo", "", "a Centrifugo v6 binary: run each frame latency run against it too, offered the same frames/s (memory engine, history on)")
	f.StringVar(&o.CrossDaemon, "cross-daemon", bench.DefaultCrossDaemonRun, "with --database: the cross-daemon latency run (turns on one daemon, streams on a second), as a --latency run")
	f.IntVar(&o.PeerPublishers, "centrifugo-publishers", bench.DefaultPeerPublishers, "publish calls to Centrifugo in flight at once (its publishers must not limit the comparison)")
	f.BoolVar(&o.PeerBatch, "centrifugo-batch", false, "publish each millisecond's publications to Centrifugo in one batch call stamped at the call (the old, unfair comparison), not one call each stamped just before it")
	f.DurationVar(&o.WarmUp, "warm-up", 3*time.Second, "time each latency run runs before its measured --duration")
	f.StringVar(&clients, "clients", "process", "where the streams' clients run: process (a process of their own, `studio bench clients`) or in-process (the bench process, beside the peer's publishers: the old way)")
	c.AddCommand(&cobra.Command{
		Use:    "clients",
		Short:  "The streams' clients of a `studio bench` latency run (started by bench; reads its job on stdin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.RunClients(cmd.InOrStdin(), cmd.OutOrStdout())
		},
	})
	f.StringArrayVar(&o.ServeFlags, "serve-flag", nil, "a flag for the bench's daemon of the frame runs, repeatable (--serve-flag=--metrics-addr=127.0.0.1:6060 --serve-flag=--pprof to profile it)")
	return c
}
