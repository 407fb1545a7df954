// Package bench measures a studio daemon against this machine's own disk:
// the write+fsync rate and the write bandwidth (512 KiB per fsync) of the
// data directory's file system are the physical limits every durable
// figure is compared with. Run (`studio
// bench`) writes SQLite files in a directory of its own, starts a daemon
// (the running binary, `studio serve`, with the script model) on
// loopback, drives it through its public API, stops it, and returns what
// it measured; Print writes it as a table. RunLoad (`studio operator
// load`) drives a running daemon's turns.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/studio/operator/internal/datadir"
)

// BigFrame is the size of the large frames of the bandwidth runs.
const BigFrame = 8 << 10

// Options are the flags of `studio bench`.
type Options struct {
	Dir           string
	Keep          bool
	Duration      time.Duration
	Conversations []int
	Latency       []string
	Idle          int
	Replay        int
	TextFlush     time.Duration
	Centrifugo    string // the peer's binary, or "" for none
	// Database: a postgres:// URL runs the appends and the daemons on that
	// database (written to: a throwaway one), with its commit rate
	// measured beside them and a cross-daemon run (CrossDaemon, a
	// --latency spec: turns on one daemon, streams on another).
	Database    string
	CrossDaemon string
	// PeerPublishers is how many of the peer's publish calls may be in
	// flight at once; 0: DefaultPeerPublishers.
	PeerPublishers int
	// PeerBatch publishes each millisecond's due publications in one call
	// of the peer's batch API, all stamped at the call (the old way),
	// instead of each in a call of its own stamped just before it.
	PeerBatch bool
	// WarmUp is each latency run's time before its measured Duration.
	WarmUp time.Duration
	// ClientsInProcess runs the streams' clients in the bench process (the
	// old way), not in a process of their own.
	ClientsInProcess bool
	// ServeFlags are more flags for the bench's own daemon (the first, whose
	// frame runs are timed), for example --metrics-addr and --pprof to
	// profile it under a run.
	ServeFlags []string
}

// DefaultCrossDaemonRun is the cross-daemon latency run: one conversation
// of 100 frames/s (a frame every 10 ms) and one stream, the load of
// BenchmarkClusterFrameLatency, so that commits, not a saturated machine,
// set the figure.
const DefaultCrossDaemonRun = "1@100/1"

// DefaultLatencyRuns are the latency runs docs/benchmarks.md reports: frame ->
// client at 100, 1 000 and 10 000 streams; 100 conversations x 1 subscriber
// with 8 KiB frames; 1 conversation -> 100 subscribers (1 000 frames/s, the
// most one conversation carries with small frames); and saturation at
// 1 000 streams, offered well above what one machine delivers.
var DefaultLatencyRuns = []string{"100@1000", "1000@2000", "10000@2000", "100@20000/1x8192", "100@1000/100", "1000@50000"}

// Result is everything bench measured.
type Result struct {
	// Backend is the store the appends and the daemons ran on: "sqlite" or
	// "postgres".
	Backend string `json:"backend"`
	Machine struct {
		CPUs      int    `json:"cpus"`
		GoVersion string `json:"goVersion"`
		Dir       string `json:"dir"`
	} `json:"machine"`
	FsyncPerSec float64 `json:"fsyncPerSec"`
	// One write+fsync pair's time in the same loop: a frame is sent only
	// after its commit's fsync, so these are its latency's floor.
	FsyncP50Ms  float64 `json:"fsyncP50Ms"`
	FsyncP99Ms  float64 `json:"fsyncP99Ms"`
	FsyncP999Ms float64 `json:"fsyncP999Ms"`
	// DiskBytesPerSec is the bandwidth probe: BandwidthWrite bytes per
	// fsync, the most the disk takes from one durable writer.
	DiskBytesPerSec float64        `json:"diskWriteBytesPerSec"`
	Appends         []appendResult `json:"appends"`
	Latency         []latencyRun   `json:"latency"`
	Idle            idleResult     `json:"idle"`
	Replay          replayResult   `json:"replay"`
	Peer            []peerRun      `json:"centrifugo,omitempty"`
	// Postgres: PostgreSQL's own commit rate (--database); CrossDaemon: a
	// frame committed on one daemon to a stream on another.
	Postgres    *postgresResult `json:"postgres,omitempty"`
	CrossDaemon *latencyRun     `json:"crossDaemon,omitempty"`
}

type appendResult struct {
	Conversations int `json:"conversations"`
	FrameBytes    int `json:"frameBytes,omitempty"` // 0: a line of ordinary length
	// Pipelined: frames queued while the previous append commits, each
	// append storing the queue (as a turn's owner appends).
	Pipelined    bool    `json:"pipelined,omitempty"`
	PerSec       float64 `json:"appendsPerSec"`
	RatioToFsync float64 `json:"ratioToFsync"`
	BytesPerSec  float64 `json:"bytesPerSec,omitempty"`
	RatioToDisk  float64 `json:"ratioToDiskBandwidth,omitempty"`
	// PostgreSQL runs: the rate against the commit loop of one connection
	// and of the pool's connections, in the same run.
	RatioToCommits     float64 `json:"ratioToPostgresCommits,omitempty"`
	RatioToPoolCommits float64 `json:"ratioToPostgresPoolCommits,omitempty"`
}

type latencyRun struct {
	Name           string  `json:"name"`
	Streams        int     `json:"streams"`
	StreamsPerConv int     `json:"streamsPerConversation"`
	Conversations  int     `json:"conversations"`
	FrameBytes     int     `json:"frameBytes"`
	TokensPerSec   float64 `json:"tokensPerSecTarget"`
	OfferedSec     float64 `json:"deliveriesPerSecOffered"`
	TextFlushMs    float64 `json:"textFlushMs"`
	FramesPerSec   float64 `json:"framesPerSec"`
	DeliveriesSec  float64 `json:"deliveriesPerSec"`
	// TokenDeliveriesSec counts each token delivered (several share a
	// frame when the model emits them within the coalescing interval).
	TokenDeliveriesSec float64 `json:"tokenDeliveriesPerSec"`
	Frames             int     `json:"framesMeasured"`
	FrameP50Ms         float64 `json:"frameP50Ms"`
	FrameP99Ms         float64 `json:"frameP99Ms"`
	FrameP999Ms        float64 `json:"frameP999Ms"`
	TokenP50Ms         float64 `json:"tokenP50Ms"`
	TokenP99Ms         float64 `json:"tokenP99Ms"`
	TokenP999Ms        float64 `json:"tokenP999Ms"`
	StoreReadsPerF     float64 `json:"storeReadsPerFrame"`
	// Listeners: the cross-daemon run's sessions listening on the database
	// as it starts; each is woken by every commit. Two: the daemons'.
	Listeners int `json:"listeningSessions,omitempty"`
	// ClientsInProcess: the streams' clients ran in the bench process (the
	// old way), not in a process of their own.
	ClientsInProcess bool `json:"clientsInProcess,omitempty"`
	// BytesPerSec is the frames' text delivered per second on one stream
	// of each conversation (what the daemon stored), and RatioToDisk its
	// share of the disk's bandwidth in the same run.
	BytesPerSec float64 `json:"bytesPerSec"`
	RatioToDisk float64 `json:"ratioToDiskBandwidth"`
}

type idleResult struct {
	Streams             int     `json:"streams"`
	RSSKiBPerStream     float64 `json:"rssKiBPerStream"`
	GoKiBPerStream      float64 `json:"goHeapStackKiBPerStream"`
	StoreReadsWhileIdle int64   `json:"storeReadsWhileIdle"`
	IdleSeconds         float64 `json:"idleSeconds"`
	// TurnsEnded is the turns the daemon ended while the streams were
	// measured: 0, or the figures include that work.
	TurnsEnded int64 `json:"turnsEndedWhileMeasured"`
}

// replayResult is the best of replayPasses of each figure, and each
// pass's.
type replayResult struct {
	Frames            int       `json:"frames"`
	StorePerSec       float64   `json:"storeFramesPerSec"`
	StreamPerSec      float64   `json:"streamFramesPerSec"`
	StreamRatioToRead float64   `json:"streamRatioToStoreRead"`
	StorePasses       []float64 `json:"storeFramesPerSecPasses"`
	StreamPasses      []float64 `json:"streamFramesPerSecPasses"`
	// The CPU per frame streamed of the client (bench itself, finding
	// each event's id) and of the daemon: the client's should be a small
	// part, or the harness limits the figure.
	ClientCPUMicros float64 `json:"clientCpuMicrosPerFrame"`
	DaemonCPUMicros float64 `json:"daemonCpuMicrosPerFrame"`
}

// progress reports what bench is doing, on stderr.
type progress struct {
	w     io.Writer
	start time.Time
}

func (p progress) say(format string, args ...any) {
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

func Run(ctx context.Context, o Options, stderr io.Writer) (*Result, error) {
	raiseFileLimit()
	r, err := newRun(o, stderr)
	if err != nil {
		return nil, err
	}
	if !o.Keep {
		defer os.RemoveAll(r.dir)
	}
	for _, step := range []func(context.Context) error{r.limits, r.appends, r.daemonRuns, r.peerRuns, r.tokenRuns} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	r.p.say("done")
	return r.res, nil
}

// run is one `studio bench`: its options, directory and backend, what
// its steps share, and the result they fill in, in order: the limits
// (fsync loop, disk bandwidth, PostgreSQL's commits), the appends, the
// daemon's runs (idle, replay, across daemons, latency), the peer's, and
// token -> screen on a second daemon.
type run struct {
	o   Options
	p   progress
	dir string
	res *Result
	// storePath is where a run's store goes: a new SQLite file in dir, or
	// the PostgreSQL database of --database.
	storePath func(name string) string
	dbArgs    []string     // the daemons' --database, if any
	crossRun  benchLatency // with --database: the cross-daemon run
	// The latency runs and the script the daemons play them from.
	runs       []benchLatency
	scriptPath string
	daemonDir  string
}

// newRun makes the bench directory and settles the backend.
func newRun(o Options, stderr io.Writer) (*run, error) {
	r := &run{o: o, p: progress{w: stderr, start: time.Now()}, dir: o.Dir, res: &Result{Backend: "sqlite"}}
	if r.dir == "" {
		d, err := os.MkdirTemp("", "studio-bench-")
		if err != nil {
			return nil, err
		}
		r.dir = d
	} else if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, err
	}
	r.storePath = func(name string) string { return filepath.Join(r.dir, name) }
	r.daemonDir = filepath.Join(r.dir, "daemon")
	r.scriptPath = filepath.Join(r.dir, "script.json")
	if o.Database != "" {
		if !isPostgresURL(o.Database) {
			return nil, fmt.Errorf("--database %q: want a postgres:// URL", redactURL(o.Database))
		}
		var err error
		if r.crossRun, err = parseLatencyRun(o.CrossDaemon); err != nil {
			return nil, fmt.Errorf("--cross-daemon: %w", err)
		}
		r.res.Backend = "postgres"
		r.storePath = func(string) string { return o.Database }
		r.dbArgs = []string{"--database", o.Database}
	}
	r.res.Machine.CPUs, r.res.Machine.GoVersion, r.res.Machine.Dir = runtime.NumCPU(), runtime.Version(), r.dir
	return r, nil
}

// limits measures what the appends are reported against, in the same
// run: the disk's write+fsync loop, its bandwidth with large writes per
// fsync, and with --database PostgreSQL's own commit rate.
func (r *run) limits(ctx context.Context) error {
	o, p, res := r.o, r.p, r.res
	p.say("fsync: write+fsync loop in %s", r.dir)
	fs, err := fsyncRate(r.dir, min(o.Duration, 3*time.Second))
	if err != nil {
		return err
	}
	res.FsyncPerSec, res.FsyncP50Ms, res.FsyncP99Ms, res.FsyncP999Ms = fs.perSec, fs.p50, fs.p99, fs.p999
	p.say("fsync: %.0f/s; one write+fsync p50 %.2f ms, p99 %.2f ms, p999 %.2f ms", fs.perSec, fs.p50, fs.p99, fs.p999)

	p.say("disk: write+fsync loop of %s per fsync", byteSize(BandwidthWrite))
	bw, err := diskBandwidth(r.dir, min(o.Duration, 3*time.Second))
	if err != nil {
		return err
	}
	res.DiskBytesPerSec = bw
	p.say("disk: %.1f MB/s", bw/1e6)

	if o.Database != "" {
		if res.Postgres, err = probePostgres(ctx, o.Database, min(o.Duration, 3*time.Second), p); err != nil {
			return err
		}
		res.Postgres.CrossDaemonRunSpec = o.CrossDaemon
	}
	return nil
}

// timing is how the latency runs are timed, and where their clients run.
func (r *run) timing() timing {
	return timing{warmUp: r.o.WarmUp, measure: r.o.Duration, inProcess: r.o.ClientsInProcess, stderr: r.p.w}
}

// ratios sets an appends row's ratios to the same run's limits.
func (r *run) ratios(a appendResult) appendResult {
	a.RatioToFsync = a.PerSec / r.res.FsyncPerSec
	if pg := r.res.Postgres; pg != nil {
		a.RatioToCommits = a.PerSec / pg.CommitsPerSec
		a.RatioToPoolCommits = a.PerSec / pg.PoolCommitsPerSec
	}
	return a
}

// appends measures durable appends at the store: by each number of
// concurrent conversations, one conversation pipelined, and large frames
// against the disk's bandwidth.
func (r *run) appends(ctx context.Context) error {
	o, p, res, fs := r.o, r.p, r.res, r.res.FsyncPerSec
	for _, n := range o.Conversations {
		p.say("appends: %d concurrent conversations for %s", n, o.Duration)
		rate, err := appendRate(ctx, r.storePath(fmt.Sprintf("appends-%d.db", n)), n, 0, o.Duration)
		if err != nil {
			return err
		}
		res.Appends = append(res.Appends, r.ratios(appendResult{Conversations: n, PerSec: rate}))
		p.say("appends: %.0f/s (%.2f x fsync)", rate, rate/fs)
	}
	p.say("appends: 1 conversation, pipelined, for %s", o.Duration)
	rate, err := pipelinedRate(ctx, r.storePath("appends-pipelined.db"), o.Duration)
	if err != nil {
		return err
	}
	res.Appends = append(res.Appends, r.ratios(appendResult{Conversations: 1, Pipelined: true, PerSec: rate}))
	p.say("appends: %.0f/s (%.2f x fsync)", rate, rate/fs)
	// Large frames, against the disk's bandwidth: as many conversations as
	// the largest small-frame run, at most 100.
	if len(o.Conversations) > 0 {
		n := min(100, slices.Max(o.Conversations))
		p.say("appends: %d concurrent conversations of %s frames for %s", n, byteSize(BigFrame), o.Duration)
		rate, err := appendRate(ctx, r.storePath(fmt.Sprintf("appends-big-%d.db", n)), n, BigFrame, o.Duration)
		if err != nil {
			return err
		}
		a := r.ratios(appendResult{Conversations: n, FrameBytes: BigFrame, PerSec: rate, BytesPerSec: rate * BigFrame})
		a.RatioToDisk = a.BytesPerSec / res.DiskBytesPerSec
		res.Appends = append(res.Appends, a)
		p.say("appends: %.0f/s, %.1f MB/s (%.3f x the disk's bandwidth)", rate, a.BytesPerSec/1e6, a.RatioToDisk)
	}
	return nil
}

// daemonRuns writes the replayed conversation and the script, starts the
// daemon and measures over its streams: idle streams, replay, with
// --database frames across daemons, and the frame latency runs.
func (r *run) daemonRuns(ctx context.Context) error {
	o, p, res := r.o, r.p, r.res
	p.say("replay: writing a %d-frame conversation", o.Replay)
	replayStore, replayConv, err := prepareReplay(ctx, r.daemonDir, r.storePath(filepath.Join("daemon", datadir.DatabaseFile)), o.Replay)
	if err != nil {
		return err
	}
	// Closed once the replay is measured: on PostgreSQL a Store listens,
	// and a third listener woken by every commit of the cross-daemon run
	// competes with the receiving daemon's for the processors.
	replayOpen := true
	defer func() {
		if replayOpen {
			replayStore.Close()
		}
	}()

	if r.runs, err = latencyRuns(o); err != nil {
		return err
	}
	scriptRuns, crossIdx := r.runs, -1
	if o.Database != "" {
		crossIdx = len(r.runs)
		scriptRuns = append(slices.Clip(r.runs), r.crossRun)
	}
	if err := writeBenchScript(r.scriptPath, scriptRuns, r.timing().length()); err != nil {
		return err
	}

	// The daemon: frames at the model's pace, so frame latency is the
	// store and the streams'. Its coalescing (0.2 ms) is shorter than the
	// script's 1 ms step, so a token is stored as it comes and one
	// conversation can carry close to 1 000 frames/s.
	d, err := startBenchDaemon(ctx, r.dir, r.daemonDir, r.scriptPath, 200*time.Microsecond, append(slices.Clip(r.dbArgs), o.ServeFlags...)...)
	if err != nil {
		return err
	}
	defer d.stop()
	p.say("daemon: pid %d at %s", d.cmd.Process.Pid, d.base)

	p.say("idle: opening %d streams", o.Idle)
	if res.Idle, err = d.idle(ctx, o.Idle, p); err != nil {
		return err
	}
	p.say("idle: %.1f KiB RSS per stream, %.1f KiB Go heap+stacks, %d store reads while idle, %d turns ended meanwhile",
		res.Idle.RSSKiBPerStream, res.Idle.GoKiBPerStream, res.Idle.StoreReadsWhileIdle, res.Idle.TurnsEnded)

	res.Replay, err = replay(ctx, d, replayStore, replayConv, o.Replay, p)
	replayOpen = false
	replayStore.Close()
	if err != nil {
		return err
	}

	// Across daemons first, before the saturating runs leave the database
	// and the daemon a backlog.
	if crossIdx >= 0 {
		lr, err := crossDaemonLatency(ctx, d, r.dir, r.scriptPath, o.Database, crossIdx, r.crossRun, r.timing(), p)
		if err != nil {
			return err
		}
		res.CrossDaemon = &lr
		p.say("cross-daemon: frame -> client p50 %.2f ms, p99 %.2f ms, p999 %.2f ms (%d frames); %.0f of %.0f deliveries/s offered",
			lr.FrameP50Ms, lr.FrameP99Ms, lr.FrameP999Ms, lr.Frames, lr.DeliveriesSec, lr.OfferedSec)
	}

	for i, lrun := range r.runs {
		if lrun.textFlush {
			continue
		}
		p.say("latency: %d streams (%d per conversation), %d-byte tokens, %.0f/s offered for %s", lrun.convs*lrun.perConv, lrun.perConv, lrun.bytes, lrun.offered(), r.timing().length())
		lr, err := d.latency(ctx, i, lrun, r.timing(), p)
		if err != nil {
			return err
		}
		lr.BytesPerSec = lr.FramesPerSec * float64(lr.FrameBytes)
		lr.RatioToDisk = lr.BytesPerSec / res.DiskBytesPerSec
		res.Latency = append(res.Latency, lr)
		p.say("latency: frame -> client p50 %.2f ms, p99 %.2f ms, p999 %.2f ms (%d frames); %.0f of %.0f deliveries/s offered",
			lr.FrameP50Ms, lr.FrameP99Ms, lr.FrameP999Ms, lr.Frames, lr.DeliveriesSec, lr.OfferedSec)
	}
	return nil
}

// peerRuns repeats the frame latency runs against Centrifugo, with
// --centrifugo, after the daemon stopped.
func (r *run) peerRuns(ctx context.Context) error {
	if r.o.Centrifugo == "" {
		return nil
	}
	return runPeer(ctx, r.o, r.timing(), r.dir, r.res, r.p)
}

// tokenRuns measures token -> screen with the coalescing interval of
// --text-flush, on a daemon of its own.
func (r *run) tokenRuns(ctx context.Context) error {
	o, p := r.o, r.p
	d, err := startBenchDaemon(ctx, r.dir, r.daemonDir, r.scriptPath, o.TextFlush, r.dbArgs...)
	if err != nil {
		return err
	}
	defer d.stop()
	for i, lrun := range r.runs {
		if !lrun.textFlush {
			continue
		}
		p.say("tokens: %d streams, %.0f tokens/s, --text-flush %s", lrun.convs*lrun.perConv, lrun.offered(), o.TextFlush)
		lr, err := d.latency(ctx, i, lrun, r.timing(), p)
		if err != nil {
			return err
		}
		lr.TextFlushMs = float64(o.TextFlush) / float64(time.Millisecond)
		r.res.Latency = append(r.res.Latency, lr)
		p.say("tokens: token -> screen p50 %.2f ms, p99 %.2f ms", lr.TokenP50Ms, lr.TokenP99Ms)
	}
	return nil
}

// raiseFileLimit lifts the soft limit on open files to the hard one: the
// idle run holds a socket per stream, and the daemon inherits the limit.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
