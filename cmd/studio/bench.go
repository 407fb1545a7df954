package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
)

// `studio bench` measures this machine against its own disk: the
// write+fsync rate of the data directory's file system is the physical
// limit every durable figure is compared with. It writes SQLite files in a
// directory of its own, starts a daemon (this binary, `studio serve`, with
// the script model) on loopback, drives it through its public API, stops
// it, and prints a table (and JSON with --json).

// benchOptions are the flags of `studio bench`.
type benchOptions struct {
	dir           string
	keep          bool
	jsonOut       bool
	quick         bool
	duration      time.Duration
	conversations []int
	latency       []string
	idle          int
	replay        int
	textFlush     time.Duration
	centrifugo    string // the peer's binary, or "" for none
}

func newBenchCmd() *cobra.Command {
	o := benchOptions{}
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure durable appends, stream latency, idle-stream memory and replay against this disk's fsync rate",
		Long: `bench measures, on this machine:
  - the write+fsync rate of a file in the bench directory: the physical limit;
  - durable frame appends/s by 1, 10, 100 and 1 000 concurrent conversations (store, group commit);
  - frame -> client latency (p50/p99/p999) and delivered frames/s over SSE: at 100, 1 000 and
    10 000 streams (10 per conversation, small frames); 100 conversations x 1 stream with 8 KiB
    frames; 1 conversation -> 100 streams; and 1 000 streams offered far more than they can take
    (saturation);
  - token -> screen latency with the text coalescing interval (--text-flush of serve);
  - memory (RSS, and Go heap+stacks) per idle stream at --idle streams, and store reads while idle;
  - replay of a --replay-frame conversation: the store read alone, and over SSE.
It starts a daemon of its own (this binary, "serve", script model) on a loopback port, stops
it when done, and removes its directory unless --keep. With --centrifugo PATH it also runs
Centrifugo v6 (memory engine, history on; build it with
go install github.com/centrifugal/centrifugo/v6@v6.9.1) and repeats each frame latency run
against it, in the same run: the same streams (uni_sse, one channel per conversation) and the
frames/s the daemon was offered, published through its HTTP API, publish -> client timed.

A latency run (--latency, repeatable or comma-separated) is STREAMS@FRAMES_PER_SECOND[/PER_CONV][xBYTES]:
STREAMS streams, PER_CONV of them on each conversation (default 10), and a turn on every
conversation whose model emits FRAMES_PER_SECOND tokens per second in all, each token padded to
BYTES bytes of text (default: its 21-byte time stamp alone). The script steps by whole
milliseconds; a token of 8 KiB or more is a frame of its own, smaller tokens of one step share a
frame (the daemon coalesces for 0.2 ms), so one conversation carries at most about 1 000 small
frames/s, each committed before the next. A run lasts --duration (turns still running then are
cancelled); delivered rates fall below the offered ones when the daemon (or this machine)
saturates.`,
		Example: `  studio bench --quick
  studio bench --json --latency 1000@2000,100@20000/1x8192,100@1000/100 > run.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.quick {
				o.duration = min(o.duration, 3*time.Second)
			}
			res, err := runBench(cmd.Context(), o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if o.jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			printBench(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.dir, "dir", "", "directory for the bench's databases (default: a new one in the system's temporary directory; it must be on the disk you mean to measure)")
	f.BoolVar(&o.keep, "keep", false, "keep the bench directory (databases, daemon log)")
	f.BoolVar(&o.jsonOut, "json", false, "print the results as JSON instead of a table")
	f.BoolVar(&o.quick, "quick", false, "short runs (3 s each), for a first look")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "length of each timed run")
	f.IntSliceVar(&o.conversations, "conversations", []int{1, 10, 100, 1000}, "concurrent conversations appending")
	f.StringSliceVar(&o.latency, "latency", defaultLatencyRuns, "latency runs: STREAMS@FRAMES_PER_SECOND[/PER_CONV][xBYTES]; left out, PER_CONV is 10 and tokens are unpadded")
	f.IntVar(&o.idle, "idle", 10000, "idle streams for the memory measurement")
	f.IntVar(&o.replay, "replay", 100000, "frames of the replayed conversation")
	f.DurationVar(&o.textFlush, "text-flush", 50*time.Millisecond, "the daemon's text coalescing interval for the token -> screen run")
	f.StringVar(&o.centrifugo, "centrifugo", "", "a Centrifugo v6 binary: run each frame latency run against it too, offered the same frames/s (memory engine, history on)")
	return c
}

// defaultLatencyRuns are the latency runs BENCHMARKS.md reports: frame ->
// client at 100, 1 000 and 10 000 streams; 100 conversations x 1 subscriber
// with 8 KiB frames; 1 conversation -> 100 subscribers (1 000 frames/s, the
// most one conversation carries with small frames); and saturation at
// 1 000 streams, offered well above what one machine delivers.
var defaultLatencyRuns = []string{"100@1000", "1000@2000", "10000@2000", "100@20000/1x8192", "100@1000/100", "1000@50000"}

// benchResult is everything bench measured.
type benchResult struct {
	Machine struct {
		CPUs      int    `json:"cpus"`
		GoVersion string `json:"goVersion"`
		Dir       string `json:"dir"`
	} `json:"machine"`
	FsyncPerSec float64        `json:"fsyncPerSec"`
	Appends     []appendResult `json:"appends"`
	Latency     []latencyRun   `json:"latency"`
	Idle        idleResult     `json:"idle"`
	Replay      replayResult   `json:"replay"`
	Peer        []peerRun      `json:"centrifugo,omitempty"`
}

type appendResult struct {
	Conversations int     `json:"conversations"`
	PerSec        float64 `json:"appendsPerSec"`
	RatioToFsync  float64 `json:"ratioToFsync"`
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
	Frames         int     `json:"framesMeasured"`
	FrameP50Ms     float64 `json:"frameP50Ms"`
	FrameP99Ms     float64 `json:"frameP99Ms"`
	FrameP999Ms    float64 `json:"frameP999Ms"`
	TokenP50Ms     float64 `json:"tokenP50Ms"`
	TokenP99Ms     float64 `json:"tokenP99Ms"`
	TokenP999Ms    float64 `json:"tokenP999Ms"`
	StoreReadsPerF float64 `json:"storeReadsPerFrame"`
}

type idleResult struct {
	Streams             int     `json:"streams"`
	RSSKiBPerStream     float64 `json:"rssKiBPerStream"`
	GoKiBPerStream      float64 `json:"goHeapStackKiBPerStream"`
	StoreReadsWhileIdle int64   `json:"storeReadsWhileIdle"`
	IdleSeconds         float64 `json:"idleSeconds"`
}

type replayResult struct {
	Frames            int     `json:"frames"`
	StorePerSec       float64 `json:"storeFramesPerSec"`
	StreamPerSec      float64 `json:"streamFramesPerSec"`
	StreamRatioToRead float64 `json:"streamRatioToStoreRead"`
}

// progress reports what bench is doing, on stderr.
type progress struct {
	w     io.Writer
	start time.Time
}

func (p progress) say(format string, args ...any) {
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

func runBench(ctx context.Context, o benchOptions, stderr io.Writer) (*benchResult, error) {
	p := progress{w: stderr, start: time.Now()}
	raiseFileLimit()
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "studio-bench-")
		if err != nil {
			return nil, err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	res := &benchResult{}
	res.Machine.CPUs, res.Machine.GoVersion, res.Machine.Dir = runtime.NumCPU(), runtime.Version(), dir

	p.say("fsync: write+fsync loop in %s", dir)
	fs, err := fsyncRate(dir, min(o.duration, 3*time.Second))
	if err != nil {
		return nil, err
	}
	res.FsyncPerSec = fs
	p.say("fsync: %.0f/s", fs)

	for _, n := range o.conversations {
		p.say("appends: %d concurrent conversations for %s", n, o.duration)
		rate, err := appendRate(ctx, filepath.Join(dir, fmt.Sprintf("appends-%d.db", n)), n, o.duration)
		if err != nil {
			return nil, err
		}
		res.Appends = append(res.Appends, appendResult{Conversations: n, PerSec: rate, RatioToFsync: rate / fs})
		p.say("appends: %.0f/s (%.2f x fsync)", rate, rate/fs)
	}

	daemonDir := filepath.Join(dir, "daemon")
	p.say("replay: writing a %d-frame conversation", o.replay)
	replayConv, storeRate, err := prepareReplay(ctx, daemonDir, o.replay)
	if err != nil {
		return nil, err
	}
	res.Replay = replayResult{Frames: o.replay, StorePerSec: storeRate}
	p.say("replay: store read alone %.0f frames/s", storeRate)

	runs, err := latencyRuns(o)
	if err != nil {
		return nil, err
	}
	scriptPath := filepath.Join(dir, "script.json")
	if err := writeBenchScript(scriptPath, runs, o.duration); err != nil {
		return nil, err
	}

	// The daemon: frames at the model's pace, so frame latency is the
	// store and the streams'. Its coalescing (0.2 ms) is shorter than the
	// script's 1 ms step, so a token is stored as it comes and one
	// conversation can carry close to 1 000 frames/s.
	d, err := startBenchDaemon(ctx, dir, daemonDir, scriptPath, 200*time.Microsecond)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	p.say("daemon: pid %d at %s", d.cmd.Process.Pid, d.base)

	p.say("idle: opening %d streams", o.idle)
	res.Idle, err = d.idle(ctx, o.idle, p)
	if err != nil {
		return nil, err
	}
	p.say("idle: %.1f KiB RSS per stream, %.1f KiB Go heap+stacks, %d store reads while idle",
		res.Idle.RSSKiBPerStream, res.Idle.GoKiBPerStream, res.Idle.StoreReadsWhileIdle)

	p.say("replay: streaming %d frames over SSE", o.replay)
	res.Replay.StreamPerSec, err = d.replay(ctx, replayConv, o.replay)
	if err != nil {
		return nil, err
	}
	res.Replay.StreamRatioToRead = res.Replay.StreamPerSec / storeRate
	p.say("replay: %.0f frames/s over SSE", res.Replay.StreamPerSec)

	for i, r := range runs {
		if r.textFlush {
			continue
		}
		p.say("latency: %d streams (%d per conversation), %d-byte tokens, %.0f/s offered for %s", r.convs*r.perConv, r.perConv, r.bytes, r.offered(), o.duration)
		lr, err := d.latency(ctx, i, r, o.duration)
		if err != nil {
			return nil, err
		}
		res.Latency = append(res.Latency, lr)
		p.say("latency: frame -> client p50 %.2f ms, p99 %.2f ms, p999 %.2f ms (%d frames); %.0f of %.0f deliveries/s offered",
			lr.FrameP50Ms, lr.FrameP99Ms, lr.FrameP999Ms, lr.Frames, lr.DeliveriesSec, lr.OfferedSec)
	}
	d.stop()

	if o.centrifugo != "" {
		if err := runPeer(ctx, o, dir, res, p); err != nil {
			return nil, err
		}
	}

	// Token -> screen with the coalescing interval: another daemon.
	d2, err := startBenchDaemon(ctx, dir, daemonDir, scriptPath, o.textFlush)
	if err != nil {
		return nil, err
	}
	defer d2.stop()
	for i, r := range runs {
		if !r.textFlush {
			continue
		}
		p.say("tokens: %d streams, %.0f tokens/s, --text-flush %s", r.convs*r.perConv, r.offered(), o.textFlush)
		lr, err := d2.latency(ctx, i, r, o.duration)
		if err != nil {
			return nil, err
		}
		lr.TextFlushMs = float64(o.textFlush) / float64(time.Millisecond)
		res.Latency = append(res.Latency, lr)
		p.say("tokens: token -> screen p50 %.2f ms, p99 %.2f ms", lr.TokenP50Ms, lr.TokenP99Ms)
	}
	d2.stop()
	p.say("done")
	return res, nil
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

// fsyncRate is how many write+fsync pairs a file in dir takes per second:
// the most durable commits the disk allows one writer.
func fsyncRate(dir string, d time.Duration) (float64, error) {
	f, err := os.CreateTemp(dir, "fsync-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := bytes.Repeat([]byte{'x'}, 512)
	n, start := 0, time.Now()
	for time.Since(start) < d {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func openBenchStore(ctx context.Context, path string) (*sqlite.Store, error) {
	st, err := sqlite.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := st.Migrate(ctx, time.Now()); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// activeConversations creates n conversations, each with a submitted
// turn that may append.
func activeConversations(ctx context.Context, st store.Store, n int) ([][2]string, error) {
	out := make([][2]string, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range out {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := st.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: time.Now()})
			if err != nil {
				errs <- err
				return
			}
			rid := uuid.NewString()
			if _, _, err := st.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: c.ID, RequestID: rid, Instruction: "bench",
				ContextJSON: []byte(`{}`), ContextHash: "bench", Now: time.Now()}); err != nil {
				errs <- err
				return
			}
			out[i] = [2]string{c.ID, rid}
		})
	}
	wg.Wait()
	close(errs)
	return out, <-errs
}

// appendRate is durable appends per second (one frame per AppendFrames,
// each returned after its commit) by n concurrent conversations.
func appendRate(ctx context.Context, path string, n int, d time.Duration) (float64, error) {
	st, err := openBenchStore(ctx, path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer st.Close()
	convs, err := activeConversations(ctx, st, n)
	if err != nil {
		return 0, err
	}
	frame := []store.NewFrame{{Payload: protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: protocol.RoleAssistant}}}
	var count atomic.Int64
	var failed atomic.Value
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for _, c := range convs {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if _, err := st.AppendFrames(ctx, store.AppendFramesParams{ConversationID: c[0], RequestID: c[1], Frames: frame, Now: time.Now()}); err != nil {
					failed.Store(err)
					return
				}
				count.Add(1)
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return 0, err
	}
	return float64(count.Load()) / time.Since(start).Seconds(), nil
}

// prepareReplay writes the daemon's database with one conversation of n
// frames, and times reading it back from the store alone.
func prepareReplay(ctx context.Context, daemonDir string, n int) (string, float64, error) {
	if err := os.MkdirAll(daemonDir, 0o700); err != nil {
		return "", 0, err
	}
	st, err := openBenchStore(ctx, dbPath(daemonDir))
	if err != nil {
		return "", 0, err
	}
	defer st.Close()
	convs, err := activeConversations(ctx, st, 1)
	if err != nil {
		return "", 0, err
	}
	conv, rid := convs[0][0], convs[0][1]
	batch := make([]store.NewFrame, 500)
	for i := range batch {
		batch[i] = store.NewFrame{Payload: protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: protocol.RoleAssistant}}
	}
	for written := 1; written < n-1; written += len(batch) {
		b := batch[:min(len(batch), n-1-written)]
		if _, err := st.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv, RequestID: rid, Frames: b, Now: time.Now()}); err != nil {
			return "", 0, err
		}
	}
	if _, _, err := st.FinishTurn(ctx, store.FinishTurnParams{RequestID: rid, Status: store.TurnCompleted, Now: time.Now()}); err != nil {
		return "", 0, err
	}
	start, after, read := time.Now(), int64(0), 0
	for {
		fs, err := st.ListFrames(ctx, store.ListFramesParams{ConversationID: conv, AfterSequence: after, Limit: 500})
		if err != nil {
			return "", 0, err
		}
		if len(fs) == 0 {
			break
		}
		read += len(fs)
		after = fs[len(fs)-1].Sequence
	}
	return conv, float64(read) / time.Since(start).Seconds(), nil
}

// benchLatency is one latency run: convs conversations with perConv
// streams each, and the model's token rate over all its conversations,
// each token padded to bytes; textFlush: the token -> screen run on the
// daemon with that coalescing.
type benchLatency struct {
	convs, perConv int
	rate           float64
	bytes          int
	textFlush      bool
}

// stampBytes is the length of an unpadded token: "t", the Unix time in
// nanoseconds (19 digits), ";".
const stampBytes = 21

// pace is how the script plays a run: tokens text steps, then a sleep of
// ms, per conversation. Sleeps are whole milliseconds: above 1 000 tokens/s
// a conversation emits several tokens per step.
func (r benchLatency) pace() (tokens int, ms int64) {
	per := r.rate / float64(r.convs)
	if per >= 1000 {
		return max(1, int(math.Round(per/1000))), 1
	}
	return 1, max(1, int64(math.Round(1000/per)))
}

// offered is the token rate the script plays, over all conversations.
func (r benchLatency) offered() float64 {
	tokens, ms := r.pace()
	return float64(r.convs*tokens) * 1000 / float64(ms)
}

// parseLatencyRun reads STREAMS@FRAMES_PER_SECOND[/PER_CONV][xBYTES].
func parseLatencyRun(spec string) (benchLatency, error) {
	bad := fmt.Errorf("--latency %q: want STREAMS@FRAMES_PER_SECOND[/PER_CONV][xBYTES], e.g. 1000@2000 or 100@20000/1x8192", spec)
	r := benchLatency{perConv: 10, bytes: stampBytes}
	rest, size, sized := strings.Cut(spec, "x")
	if sized {
		b, err := strconv.Atoi(size)
		if err != nil {
			return r, bad
		}
		if b < stampBytes {
			return r, fmt.Errorf("--latency %q: BYTES must be at least %d (the token's time stamp)", spec, stampBytes)
		}
		r.bytes = b
	}
	rest, per, perSet := strings.Cut(rest, "/")
	s, rate, ok := strings.Cut(rest, "@")
	streams, err1 := strconv.Atoi(s)
	var err2 error
	r.rate, err2 = strconv.ParseFloat(rate, 64)
	if !ok || err1 != nil || err2 != nil || streams < 1 || r.rate <= 0 {
		return r, bad
	}
	if perSet {
		n, err := strconv.Atoi(per)
		if err != nil || n < 1 || n > streams {
			return r, fmt.Errorf("--latency %q: PER_CONV must be between 1 and STREAMS", spec)
		}
		r.perConv = n
	}
	r.perConv = min(r.perConv, streams)
	r.convs = streams / r.perConv
	return r, nil
}

func latencyRuns(o benchOptions) ([]benchLatency, error) {
	var runs []benchLatency
	for _, spec := range o.latency {
		r, err := parseLatencyRun(spec)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	// The token -> screen run: the first latency run's load, coalesced.
	if len(runs) > 0 {
		t := runs[0]
		t.textFlush = true
		runs = append(runs, t)
	}
	return runs, nil
}

// writeBenchScript writes the script model's turns: turn i emits tokens
// stamped with their time (padded to run i's size) at its share of run
// i's rate, for d.
func writeBenchScript(path string, runs []benchLatency, d time.Duration) error {
	var s script.Script
	for i, r := range runs {
		tokens, ms := r.pace()
		steps := int(d / time.Duration(ms*int64(time.Millisecond)))
		tok := "t" + script.EmittedAt + ";" + strings.Repeat("x", r.bytes-stampBytes)
		turn := script.Turn{Match: fmt.Sprintf("bench-run-%d.", i)}
		for range max(1, steps) {
			for range tokens {
				turn.Steps = append(turn.Steps, script.Step{Text: &tok})
			}
			turn.Steps = append(turn.Steps, script.Step{SleepMs: &ms})
		}
		s.Turns = append(s.Turns, turn)
	}
	b, err := protocol.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// benchDaemon is a `studio serve` that bench started.
type benchDaemon struct {
	cmd    *exec.Cmd
	base   string
	token  string
	client *httpapi.Client
	once   sync.Once
}

func startBenchDaemon(ctx context.Context, dir, dataDir, scriptPath string, textFlush time.Duration) (*benchDaemon, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "daemon.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(self, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--model", "script:"+scriptPath,
		"--no-seed", "--print-token-url", "--workers", "20000", "--heartbeat", "1s", "--text-flush", textFlush.String(), "--max-client-conns", "0")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STUDIO_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &benchDaemon{cmd: cmd}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		rest, ok := strings.CutPrefix(lines.Text(), "Studio cockpit: ")
		if !ok {
			continue
		}
		u, err := url.Parse(rest)
		if err != nil {
			break
		}
		tok, _ := url.QueryUnescape(strings.TrimPrefix(u.Fragment, "token="))
		d.base, d.token = "http://"+u.Host, tok
		break
	}
	go io.Copy(io.Discard, out) //nolint:errcheck // the rest of stdout
	if d.base == "" {
		d.stop()
		return nil, errors.New("the bench daemon did not start: see daemon.log in the bench directory (--keep)")
	}
	d.client = httpapi.NewClient(d.base, d.token, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
	return d, nil
}

func (d *benchDaemon) stop() {
	d.once.Do(func() { stopProcess(d.cmd, syscall.SIGTERM, 30*time.Second) })
}

// stopProcess sends cmd's process sig, waits for it to exit, and kills it
// after grace.
func stopProcess(cmd *exec.Cmd, sig os.Signal, grace time.Duration) {
	_ = cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// rssKiB is the daemon's resident memory.
func (d *benchDaemon) rssKiB() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS")
}

// metric reads one value of the daemon's /metrics.
func (d *benchDaemon) metric(ctx context.Context, name string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

func (d *benchDaemon) conversations(ctx context.Context, n int) ([]string, error) {
	ids := make([]string, n)
	return ids, inParallel(n, func(i int) error {
		c, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
		ids[i] = c.ID
		return err
	})
}

// openStream opens a stream on a bare connection and reads its response
// head and opening comment; nothing more is read unless the caller reads.
func (d *benchDaemon) openStream(convID string, after int64) (net.Conn, *bufio.Reader, error) {
	req := fmt.Sprintf("GET /api/operator/conversations/%s/stream?after_sequence=%d HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n",
		convID, after, d.token)
	return openSSE(d.base, req, "open stream", func(line string) bool { return strings.HasPrefix(line, ": connected") })
}

// openSSE sends req (a whole HTTP/1.1 request) on a new connection to base
// and reads the response until the line ready accepts: a stream is open,
// and nothing more is read unless the caller reads.
func openSSE(base, req, what string, ready func(line string) bool) (net.Conn, *bufio.Reader, error) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return nil, nil, err
	}
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	r := bufio.NewReaderSize(conn, 512)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("%s: %w", what, err)
		}
		if ready(line) {
			_ = conn.SetReadDeadline(time.Time{})
			return conn, r, nil
		}
		if strings.HasPrefix(line, "HTTP/1.1 ") && !strings.HasPrefix(line, "HTTP/1.1 200") {
			conn.Close()
			return nil, nil, fmt.Errorf("%s: %s", what, strings.TrimSpace(line))
		}
	}
}

// idle opens n streams (10 per conversation), lets them idle through
// heartbeats, and measures what they cost the daemon.
func (d *benchDaemon) idle(ctx context.Context, n int, p progress) (idleResult, error) {
	res := idleResult{Streams: n}
	ids, err := d.conversations(ctx, max(1, n/10))
	if err != nil {
		return res, err
	}
	// Warm the code paths, then the baseline.
	warm := make([]net.Conn, 0, 10)
	for i := range 10 {
		c, _, err := d.openStream(ids[i%len(ids)], 0)
		if err != nil {
			return res, err
		}
		warm = append(warm, c)
	}
	time.Sleep(2 * time.Second) // let the daemon settle (GC, scavenger) before the baseline
	rss0, err := d.rssKiB()
	if err != nil {
		return res, err
	}
	heap0, _ := d.metric(ctx, "studio_go_heap_stack_inuse_bytes")
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range append(conns, warm...) {
			c.Close()
		}
	}()
	for i := range n {
		c, _, err := d.openStream(ids[i%len(ids)], 0)
		if err != nil {
			return res, fmt.Errorf("stream %d: %w", i, err)
		}
		conns = append(conns, c)
		if (i+1)%2000 == 0 {
			p.say("idle: %d streams open", i+1)
		}
	}
	time.Sleep(2 * time.Second) // every stream has replayed and waits
	reads0, err := d.metric(ctx, "studio_operator_stream_store_reads_total")
	if err != nil {
		return res, err
	}
	const idleFor = 5 * time.Second // five heartbeats of the bench daemon
	time.Sleep(idleFor)
	reads1, err := d.metric(ctx, "studio_operator_stream_store_reads_total")
	if err != nil {
		return res, err
	}
	rss1, err := d.rssKiB()
	if err != nil {
		return res, err
	}
	heap1, _ := d.metric(ctx, "studio_go_heap_stack_inuse_bytes")
	res.RSSKiBPerStream = float64(rss1-rss0) / float64(n)
	res.GoKiBPerStream = (heap1 - heap0) / 1024 / float64(n)
	res.StoreReadsWhileIdle = int64(reads1 - reads0)
	res.IdleSeconds = idleFor.Seconds()
	return res, nil
}

// replay streams a conversation of n frames from cursor 0 over SSE.
func (d *benchDaemon) replay(ctx context.Context, convID string, n int) (float64, error) {
	conn, r, err := d.openStream(convID, 0)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(5 * time.Minute))
	seen := 0
	for seen < n {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the rest of a long data line
		}
		if err != nil {
			return 0, err
		}
		if bytes.HasPrefix(line, []byte("id: ")) {
			seen++
		}
	}
	return float64(seen) / time.Since(start).Seconds(), nil
}

// latency runs one latency run: conversations with r.perConv streams
// each, one turn per conversation playing turn i of the script; every
// stream times each frame (its createdAt) and each token (its stamp) to its
// arrival. Turns still running after dur are cancelled, so a saturated run
// ends once its streams have caught up.
func (d *benchDaemon) latency(ctx context.Context, i int, r benchLatency, dur time.Duration) (latencyRun, error) {
	streams := r.convs * r.perConv
	res := latencyRun{Name: fmt.Sprintf("%d streams (%d/conversation) @ %.0f/s x %d B", streams, r.perConv, r.offered(), r.bytes),
		Streams: streams, StreamsPerConv: r.perConv, Conversations: r.convs, FrameBytes: r.bytes,
		TokensPerSec: r.offered(), OfferedSec: r.offered() * float64(r.perConv)}
	ids, err := d.conversations(ctx, r.convs)
	if err != nil {
		return res, err
	}
	type sample struct{ frames, tokens []time.Duration }
	samples := make([]sample, streams)
	var wg sync.WaitGroup
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	warmup := time.Now().Add(dur / 10)
	for s := range samples {
		conn, br, err := d.openStream(ids[s/r.perConv], 0)
		if err != nil {
			return res, err
		}
		conns = append(conns, conn)
		wg.Go(func() {
			_ = conn.SetReadDeadline(time.Now().Add(dur + 2*time.Minute))
			rd := bufio.NewReaderSize(br, max(16<<10, r.bytes+8<<10)) // a whole data line
			for {
				line, err := rd.ReadSlice('\n')
				if err != nil {
					return
				}
				now := time.Now()
				data, ok := bytes.CutPrefix(line, []byte("data: "))
				if !ok {
					continue
				}
				if bytes.Contains(data, []byte(`"type":"done"`)) {
					return
				}
				if now.Before(warmup) || !bytes.Contains(data, []byte(`"role":"assistant"`)) {
					continue
				}
				if at, ok := jsonNumberAfter(data, `"createdAt":`); ok {
					samples[s].frames = append(samples[s].frames, now.Sub(protocol.Time(at)))
				}
				if content, ok := jsonStringAfter(data, `"content":"`); ok {
					for tok := range bytes.SplitSeq(content, []byte(";")) {
						if len(tok) < 2 || tok[0] != 't' { // the padding
							continue
						}
						if ns, err := strconv.ParseInt(string(tok[1:]), 10, 64); err == nil {
							samples[s].tokens = append(samples[s].tokens, now.Sub(time.Unix(0, ns)))
						}
					}
				}
			}
		})
	}
	streamsDone := make(chan struct{})
	go func() { wg.Wait(); close(streamsDone) }()
	reads0, _ := d.metric(ctx, "studio_operator_stream_store_reads_total")
	start := time.Now()
	requests := make([]string, len(ids))
	err = inParallel(len(ids), func(j int) error {
		zero := int64(0)
		acc, err := d.client.SubmitTurn(ctx, ids[j], protocol.TurnRequest{Instruction: fmt.Sprintf("bench-run-%d.", i),
			Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero})
		requests[j] = acc.RequestID
		return err
	})
	if err != nil {
		return res, err
	}
	select {
	case <-streamsDone:
	case <-time.After(time.Until(start.Add(dur))):
		// The run's time is up: turns a saturated daemon has not finished
		// are cancelled (a finished one answers its state).
		if err := inParallel(len(ids), func(j int) error {
			_, err := d.client.Cancel(ctx, ids[j], requests[j])
			return err
		}); err != nil {
			return res, err
		}
		<-streamsDone
	}
	elapsed := time.Since(start)
	reads1, _ := d.metric(ctx, "studio_operator_stream_store_reads_total")
	var frames, tokens []time.Duration
	for _, s := range samples {
		frames = append(frames, s.frames...)
		tokens = append(tokens, s.tokens...)
	}
	res.Frames = len(frames)
	res.DeliveriesSec = float64(len(frames)) / (elapsed.Seconds() * 0.9)
	res.FramesPerSec = res.DeliveriesSec / float64(r.perConv)
	res.FrameP50Ms, res.FrameP99Ms, res.FrameP999Ms = pctMs(frames, 50), pctMs(frames, 99), pctMs(frames, 99.9)
	res.TokenP50Ms, res.TokenP99Ms, res.TokenP999Ms = pctMs(tokens, 50), pctMs(tokens, 99), pctMs(tokens, 99.9)
	if res.Frames > 0 {
		res.StoreReadsPerF = (reads1 - reads0) / (float64(res.Frames) / float64(r.perConv))
	}
	return res, nil
}

// inParallel calls fn(0) … fn(n-1), 32 at a time, and returns the first
// error.
func inParallel(n int, fn func(j int) error) error {
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for j := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := fn(j); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// jsonNumberAfter parses the number that follows key in data.
func jsonNumberAfter(data []byte, key string) (float64, bool) {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := data[i+len(key):]
	end := bytes.IndexAny(rest, ",}")
	if end < 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(rest[:end]), 64)
	return v, err == nil
}

// jsonStringAfter is the string (without escapes) that follows key in data.
func jsonStringAfter(data []byte, key string) ([]byte, bool) {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return nil, false
	}
	rest := data[i+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil, false
	}
	return rest[:end], true
}

func pctMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := min(len(ds)-1, int(float64(len(ds))*p/100))
	return float64(ds[i]) / float64(time.Millisecond)
}

// byteSize is n in B, or in KiB when whole.
func byteSize(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func printBench(w io.Writer, r *benchResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "machine\t%d CPUs, %s, dir %s\n", r.Machine.CPUs, r.Machine.GoVersion, r.Machine.Dir)
	fmt.Fprintf(tw, "write+fsync loop (the limit)\t%.0f/s\n", r.FsyncPerSec)
	for _, a := range r.Appends {
		fmt.Fprintf(tw, "durable appends, %d conversations\t%.0f/s\t%.2f x fsync\n", a.Conversations, a.PerSec, a.RatioToFsync)
	}
	for _, l := range r.Latency {
		if l.TextFlushMs > 0 {
			fmt.Fprintf(tw, "token -> screen, %d streams, %.0f tokens/s, --text-flush %.0fms\tp50 %.2f ms\tp99 %.2f ms\tp999 %.2f ms\n",
				l.Streams, l.TokensPerSec, l.TextFlushMs, l.TokenP50Ms, l.TokenP99Ms, l.TokenP999Ms)
			continue
		}
		fmt.Fprintf(tw, "frame -> client, %d streams (%d/conversation), %s tokens, %.0f/s offered\tp50 %.2f ms\tp99 %.2f ms\tp999 %.2f ms\tdelivered %.0f frames/s, %.0f deliveries/s of %.0f offered, %.3f store reads/frame\n",
			l.Streams, l.StreamsPerConv, byteSize(l.FrameBytes), l.TokensPerSec, l.FrameP50Ms, l.FrameP99Ms, l.FrameP999Ms,
			l.FramesPerSec, l.DeliveriesSec, l.OfferedSec, l.StoreReadsPerF)
	}
	for _, pr := range r.Peer {
		fmt.Fprintf(tw, "centrifugo, %d streams on %d channels, %s frames, %.0f/s published\tp50 %.2f ms\tp99 %.2f ms\tp999 %.2f ms\tdelivered %.0f deliveries/s; the daemon's p99 is %.1f x\n",
			pr.Streams, pr.Channels, byteSize(pr.FrameBytes), pr.PublishedSec, pr.P50Ms, pr.P99Ms, pr.P999Ms, pr.DeliveriesSec, pr.StudioP99Ratio)
	}
	fmt.Fprintf(tw, "idle streams: %d\t%.1f KiB RSS/stream\t%.1f KiB Go heap+stacks/stream\t%d store reads in %.0f s idle\n",
		r.Idle.Streams, r.Idle.RSSKiBPerStream, r.Idle.GoKiBPerStream, r.Idle.StoreReadsWhileIdle, r.Idle.IdleSeconds)
	fmt.Fprintf(tw, "replay, %d frames\tstore read %.0f/s\tSSE %.0f/s\t%.2f x store read\n",
		r.Replay.Frames, r.Replay.StorePerSec, r.Replay.StreamPerSec, r.Replay.StreamRatioToRead)
	tw.Flush()
}
