package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// byteSize is n in B, or in KiB when whole.
func byteSize(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func Print(w io.Writer, r *Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "machine\t%d CPUs, %s, dir %s\n", r.Machine.CPUs, r.Machine.GoVersion, r.Machine.Dir)
	backend := "SQLite files in the bench directory"
	if pg := r.Postgres; pg != nil {
		backend = "PostgreSQL " + pg.URL
	}
	fmt.Fprintf(tw, "backend (appends, daemons)\t%s\n", backend)
	fmt.Fprintf(tw, "write+fsync loop (the limit)\t%.0f/s\n", r.FsyncPerSec)
	fmt.Fprintf(tw, "one write+fsync (a frame's floor)\tp50 %.2f ms\tp99 %.2f ms\tp999 %.2f ms\n", r.FsyncP50Ms, r.FsyncP99Ms, r.FsyncP999Ms)
	fmt.Fprintf(tw, "write+fsync loop, %s per fsync (the disk's bandwidth)\t%.1f MB/s\n", byteSize(BandwidthWrite), r.DiskBytesPerSec/1e6)
	if pg := r.Postgres; pg != nil {
		fmt.Fprintf(tw, "PostgreSQL commit loop, 1 connection (its limit)\t%.0f/s\n", pg.CommitsPerSec)
		fmt.Fprintf(tw, "PostgreSQL commit loop, %d connections (group commit)\t%.0f/s\n", pg.PoolConns, pg.PoolCommitsPerSec)
	}
	// vs is an appends row's ratio to the same run's limit.
	vs := func(a appendResult) string {
		if r.Postgres != nil {
			return fmt.Sprintf("%.2f x PostgreSQL's commit loop (%.2f x its %d-connection rate)", a.RatioToCommits, a.RatioToPoolCommits, r.Postgres.PoolConns)
		}
		return fmt.Sprintf("%.2f x fsync", a.RatioToFsync)
	}
	for _, a := range r.Appends {
		if a.FrameBytes > 0 {
			fmt.Fprintf(tw, "durable appends, %d conversations, %s frames\t%.0f/s\t%.1f MB/s\t%.3f x the disk's bandwidth\t%s\n", a.Conversations, byteSize(a.FrameBytes), a.PerSec, a.BytesPerSec/1e6, a.RatioToDisk, vs(a))
			continue
		}
		if a.Pipelined {
			fmt.Fprintf(tw, "durable frames, 1 conversation, pipelined\t%.0f/s\t%s\n", a.PerSec, vs(a))
			continue
		}
		fmt.Fprintf(tw, "durable appends, %d conversations\t%.0f/s\t%s\n", a.Conversations, a.PerSec, vs(a))
	}
	for _, l := range r.Latency {
		if l.TextFlushMs > 0 {
			fmt.Fprintf(tw, "token -> screen, %d streams, %.0f tokens/s, --text-flush %.0fms\tp50 %.2f ms\tp99 %.2f ms\tp999 %.2f ms\n",
				l.Streams, l.TokensPerSec, l.TextFlushMs, l.TokenP50Ms, l.TokenP99Ms, l.TokenP999Ms)
			continue
		}
		fmt.Fprintf(tw, "frame -> client, %d streams (%d/conversation), %s tokens, %.0f/s offered\tp50 %.2f ms\tp99 %.2f ms\tp999 %.2f ms\tdelivered %.0f frames/s, %.0f deliveries/s of %.0f offered, %.3f store reads/frame, %.1f MB/s stored (%.3f x the disk's bandwidth)\n",
			l.Streams, l.StreamsPerConv, byteSize(l.FrameBytes), l.TokensPerSec, l.FrameP50Ms, l.FrameP99Ms, l.FrameP999Ms,
			l.FramesPerSec, l.DeliveriesSec, l.OfferedSec, l.StoreReadsPerF, l.BytesPerSec/1e6, l.RatioToDisk)
	}
	if l := r.CrossDaemon; l != nil {
		fmt.Fprintf(tw, "frame -> client across daemons (turns on one, streams on another), %d streams (%d/conversation), %.0f/s offered\tp50 %.2f ms\tp99 %.2f ms\tp999 %.2f ms\tdelivered %.0f deliveries/s of %.0f offered, %.3f store reads/frame\n",
			l.Streams, l.StreamsPerConv, l.TokensPerSec, l.FrameP50Ms, l.FrameP99Ms, l.FrameP999Ms, l.DeliveriesSec, l.OfferedSec, l.StoreReadsPerF)
	}
	for _, pr := range r.Peer {
		var how []string
		if pr.Batched {
			how = append(how, "batched per ms")
		}
		if pr.ClientsInProcess {
			how = append(how, "clients in the bench process")
		}
		if pr.PublishersBehind {
			how = append(how, "publishers behind: the bench process limited this run")
		}
		note := ""
		if len(how) > 0 {
			note = " (" + strings.Join(how, "; ") + ")"
		}
		fmt.Fprintf(tw, "centrifugo, %d streams on %d channels, %s frames, %.0f/s published\tp50 %.2f ms\tp99 %.2f ms\tp999 %.2f ms\tdelivered %.0f deliveries/s; the daemon's p50/p99/p999 are %.1f / %.1f / %.1f x%s\n",
			pr.Streams, pr.Channels, byteSize(pr.FrameBytes), pr.PublishedSec, pr.P50Ms, pr.P99Ms, pr.P999Ms, pr.DeliveriesSec, pr.StudioP50Ratio, pr.StudioP99Ratio, pr.StudioP999Ratio, note)
	}
	fmt.Fprintf(tw, "idle streams: %d\t%.1f KiB RSS/stream\t%.1f KiB Go heap+stacks/stream\t%d store reads in %.0f s idle\t%d turns ended meanwhile\n",
		r.Idle.Streams, r.Idle.RSSKiBPerStream, r.Idle.GoKiBPerStream, r.Idle.StoreReadsWhileIdle, r.Idle.IdleSeconds, r.Idle.TurnsEnded)
	fmt.Fprintf(tw, "replay, %d frames\tstore read %.0f/s\tSSE %.0f/s\t%.2f x store read\tCPU/frame: client %.2f µs, daemon %.2f µs\n",
		r.Replay.Frames, r.Replay.StorePerSec, r.Replay.StreamPerSec, r.Replay.StreamRatioToRead, r.Replay.ClientCPUMicros, r.Replay.DaemonCPUMicros)
	tw.Flush()
}
