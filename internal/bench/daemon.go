package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// benchDaemon is a `studio serve` that bench started.
type benchDaemon struct {
	cmd    *exec.Cmd
	base   string
	token  string
	client *apiclient.Client
	once   sync.Once
	// streamsOn, when set, is the daemon whose streams openStream opens:
	// another daemon on the same database (see via).
	streamsOn *benchDaemon
}

// startBenchDaemon starts `studio serve` on dataDir; extra are more flags
// (the --database of a PostgreSQL run).
func startBenchDaemon(ctx context.Context, dir, dataDir, scriptPath string, textFlush time.Duration, extra ...string) (*benchDaemon, error) {
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
	cmd.Args = append(cmd.Args, extra...)
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
	d.client = apiclient.New(d.base, d.token, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
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
	return d.scrapeMetrics(ctx, func(r io.Reader) (float64, error) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				return strconv.ParseFloat(v, 64)
			}
		}
		return 0, fmt.Errorf("metric %s not found", name)
	})
}

// metricSum is the sum of a metric's series, whatever their labels (0
// when it has none yet).
func (d *benchDaemon) metricSum(ctx context.Context, name string) (float64, error) {
	return d.scrapeMetrics(ctx, func(r io.Reader) (float64, error) { return sumSeries(r, name) })
}

// scrapeMetrics fetches the daemon's /metrics and reads a figure from it.
func (d *benchDaemon) scrapeMetrics(ctx context.Context, read func(io.Reader) (float64, error)) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return read(resp.Body)
}

// sumSeries sums the samples of name's series in a Prometheus text
// exposition.
func sumSeries(r io.Reader, name string) (float64, error) {
	sum := 0.0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok || rest == "" || rest[0] != ' ' && rest[0] != '{' {
			continue // another metric, or one whose name extends name
		}
		if rest[0] == '{' {
			_, rest, ok = strings.Cut(rest, "} ")
			if !ok {
				continue
			}
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", name, err)
		}
		sum += v
	}
	return sum, sc.Err()
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
	on := d
	if d.streamsOn != nil {
		on = d.streamsOn
	}
	return openDaemonStream(on.base, on.token, convID, after)
}

// openDaemonStream opens a conversation's stream on the daemon at base
// from cursor after, and reads up to its opening comment.
func openDaemonStream(base, token, convID string, after int64) (net.Conn, *bufio.Reader, error) {
	req := fmt.Sprintf("GET /api/operator/conversations/%s/stream?after_sequence=%d HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n",
		convID, after, token)
	return openSSE(base, req, "open stream", func(line string) bool { return strings.HasPrefix(line, ": connected") })
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
	// Turns the daemon ends meanwhile are work beside the streams (a
	// database another run left queued turns in): their memory is not the
	// streams'.
	turns0, err := d.metricSum(ctx, "studio_operator_turns_total")
	if err != nil {
		return res, err
	}
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
	turns1, err := d.metricSum(ctx, "studio_operator_turns_total")
	if err != nil {
		return res, err
	}
	res.TurnsEnded = int64(turns1 - turns0)
	res.RSSKiBPerStream = float64(rss1-rss0) / float64(n)
	res.GoKiBPerStream = (heap1 - heap0) / 1024 / float64(n)
	res.StoreReadsWhileIdle = int64(reads1 - reads0)
	res.IdleSeconds = idleFor.Seconds()
	return res, nil
}

// replayPasses is how many times replay reads the conversation from the
// store and streams it: the best of each stands for what the machine
// can do, the others for what else ran on it meanwhile.
const replayPasses = 3

// replay measures a conversation of n frames read from the store alone
// (st, the bench's own connection to the daemon's database) and
// streamed over SSE from cursor 0, replayPasses times each, interleaved:
// both figures meet the same load.
func replay(ctx context.Context, d *benchDaemon, st store.Store, convID string, n int, p progress) (replayResult, error) {
	res := replayResult{Frames: n}
	var client, daemon float64
	for i := range replayPasses {
		read, err := storeReadRate(ctx, st, convID)
		if err != nil {
			return res, err
		}
		p.say("replay: store read alone %.0f frames/s", read)
		stream, c, dc, err := d.replay(ctx, convID, n)
		if err != nil {
			return res, err
		}
		p.say("replay: %.0f frames/s over SSE; CPU per frame: client %.2f µs, daemon %.2f µs", stream, c, dc)
		res.StorePasses, res.StreamPasses = append(res.StorePasses, read), append(res.StreamPasses, stream)
		if i == 0 || stream > res.StreamPerSec {
			client, daemon = c, dc // of the best stream
		}
		res.StorePerSec, res.StreamPerSec = max(res.StorePerSec, read), max(res.StreamPerSec, stream)
	}
	res.StreamRatioToRead = res.StreamPerSec / res.StorePerSec
	res.ClientCPUMicros, res.DaemonCPUMicros = client, daemon
	p.say("replay: the best of %d, %.2f x the store read", replayPasses, res.StreamRatioToRead)
	return res, nil
}

// replay streams a conversation of n frames from cursor 0 over SSE: the
// frames/s, and the CPU the bench (the client) and the daemon spent per
// frame, which tell whether the client's reading limits the figure.
func (d *benchDaemon) replay(ctx context.Context, convID string, n int) (rate, clientCPU, daemonCPU float64, err error) {
	conn, r0, err := d.openStream(convID, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close()
	// Reads of 64 KiB: openStream's small buffer would cost the client a
	// read system call per couple of events. Once that buffer is drained,
	// the reads go straight to the connection.
	r := bufio.NewReaderSize(r0, 64<<10)
	client0, daemon0 := processCPU(), d.cpu()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(5 * time.Minute))
	seen := 0
	for seen < n {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the rest of a long data line
		}
		if err != nil {
			return 0, 0, 0, err
		}
		if bytes.HasPrefix(line, []byte("id: ")) {
			seen++
		}
	}
	rate = float64(seen) / time.Since(start).Seconds()
	perFrame := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(seen) }
	return rate, perFrame(processCPU() - client0), perFrame(d.cpu() - daemon0), nil
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpu is the CPU time (user and system) the daemon used so far, to the
// kernel's clock tick (10 ms); 0 where /proc cannot tell.
func (d *benchDaemon) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name (in parentheses, which may
	// hold spaces): utime and stime are the 12th and 13th of them.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ is 100 on Linux
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
