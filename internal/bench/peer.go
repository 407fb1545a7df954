package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The peer of `studio bench --centrifugo PATH`: Centrifugo v6,
// the server a user would pick for live fan-out, run by bench on loopback
// with its memory engine and channel history on (not durable), and driven
// the way its users drive it: the same streams as the daemon's run
// (uni_sse connections, each subscribed to one channel, PER_CONV to a
// channel) read by clients in a process of their own, and the frames the
// daemon was offered per second, each published by a call of its own to
// the HTTP API, stamped just before the call. Publish -> client is its side
// of frame -> client.

// peerRun is one latency run of the peer.
type peerRun struct {
	Name          string  `json:"name"`
	Streams       int     `json:"streams"`
	Channels      int     `json:"channels"`
	FrameBytes    int     `json:"frameBytes"`
	PublishedSec  float64 `json:"publishedPerSec"`
	DeliveriesSec float64 `json:"deliveriesPerSec"`
	Frames        int     `json:"framesMeasured"`
	P50Ms         float64 `json:"p50Ms"`
	P99Ms         float64 `json:"p99Ms"`
	P999Ms        float64 `json:"p999Ms"`
	// Dropped is the publications not made because the publishers were
	// behind; PublishersBehind says they published less than 95 % of the
	// offer: then the bench process, not the peer, limited the run.
	Dropped          int64 `json:"publicationsDropped"`
	PublishersBehind bool  `json:"publishersBehind"`
	Publishers       int   `json:"publishers"` // calls in flight at most
	// Batched: each millisecond's publications went in one batch call,
	// stamped at the call (the old way), not one call each.
	Batched          bool `json:"batched,omitempty"`
	ClientsInProcess bool `json:"clientsInProcess,omitempty"`
	// The daemon's frame -> client percentiles over the peer's, same
	// machine, same run.
	StudioP50Ratio  float64 `json:"studioP50Ratio"`
	StudioP99Ratio  float64 `json:"studioP99Ratio"`
	StudioP999Ratio float64 `json:"studioP999Ratio"`
}

// centrifugo is a Centrifugo server that bench started.
type centrifugo struct {
	cmd  *exec.Cmd
	base string
	http *http.Client
	log  *os.File
}

// startCentrifugo starts bin on a free loopback port with a configuration
// written to dir.
func startCentrifugo(ctx context.Context, bin, dir string) (*centrifugo, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := map[string]any{
		"http_server": map[string]any{"address": "127.0.0.1", "port": port},
		"log":         map[string]any{"level": "error"},
		"client":      map[string]any{"insecure": true, "allowed_origins": []string{"*"}},
		"uni_sse":     map[string]any{"enabled": true},
		"http_api":    map[string]any{"insecure": true},
		"health":      map[string]any{"enabled": true},
		"usage_stats": map[string]any{"disabled": true},
		"channel": map[string]any{"without_namespace": map[string]any{
			"history_size": 100, "history_ttl": "300s", "force_recovery": false}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "centrifugo.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "centrifugo.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "--config", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	c := &centrifugo{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), log: logf,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.http.Get(c.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("centrifugo did not answer /health at %s (its log: %s)", c.base, logf.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *centrifugo) stop() {
	stopProcess(c.cmd, os.Interrupt, 10*time.Second)
	c.log.Close()
}

// DefaultPeerPublishers is how many publish calls may be in flight at
// once: enough that a peer answering each call in a few milliseconds on a
// busy machine still takes 2 000 publications a second.
const DefaultPeerPublishers = 32

// publish publishes one frame to channel in a call of its own, stamped
// just before the call, as a user's backend publishes each message.
func (c *centrifugo) publish(ctx context.Context, channel, pad string) error {
	body := make([]byte, 0, len(pad)+80)
	body = append(body, `{"channel":"`...)
	body = append(body, channel...)
	body = append(body, `","data":{"t":`...)
	body = strconv.AppendInt(body, time.Now().UnixNano(), 10)
	body = append(body, `,"p":"`...)
	body = append(body, pad...)
	body = append(body, `"}}`...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/publish", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("centrifugo publish: %s", resp.Status)
	}
	var out struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("centrifugo publish: %w", err)
	}
	if out.Error != nil {
		return fmt.Errorf("centrifugo publish: %d %s", out.Error.Code, out.Error.Message)
	}
	return nil
}

// publishBatch publishes one frame to each of chans' channels in one call
// of the batch API, each stamped with the time of the call, and returns
// how many the peer took. It is the old comparison's way (--centrifugo-batch):
// the publications of a millisecond share a stamp taken before the batch
// is encoded and sent, and the peer fans out the batch's publications one
// after another, so a publication late in a batch is timed from before
// its predecessors' delivery work.
func (c *centrifugo) publishBatch(ctx context.Context, chans []int, channel func(int) string, pad string) (int, error) {
	stamp := strconv.FormatInt(time.Now().UnixNano(), 10)
	body := make([]byte, 0, len(chans)*(len(pad)+80)+32)
	body = append(body, `{"parallel":true,"commands":[`...)
	for i, ch := range chans {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"publish":{"channel":"`...)
		body = append(body, channel(ch)...)
		body = append(body, `","data":{"t":`...)
		body = append(body, stamp...)
		body = append(body, `,"p":"`...)
		body = append(body, pad...)
		body = append(body, `"}}}`...)
	}
	body = append(body, "]}"...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/batch", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("centrifugo batch: %s", resp.Status)
	}
	var out struct {
		Replies []struct {
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"replies"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("centrifugo batch: %w", err)
	}
	ok, err := 0, error(nil)
	for _, r := range out.Replies {
		if r.Error != nil {
			err = fmt.Errorf("centrifugo publish: %d %s", r.Error.Code, r.Error.Message)
			continue
		}
		ok++
	}
	return ok, err
}

// latency is one peer run in the shape of the daemon's run lr: lr's
// streams on lr's conversations' count of channels, and the frames per
// second the daemon was offered (a token a frame), padded to its frame
// size, for the run's length. Publications the publishers cannot keep up
// with are not made: a saturated run measures what the peer takes, as the
// daemon's does. It mirrors benchDaemon.latency step for step, so the two
// read side by side.
func (c *centrifugo) latency(ctx context.Context, lr latencyRun, t timing, publishers int, batch bool) (peerRun, error) {
	res := peerRun{Name: lr.Name, Streams: lr.Streams, Channels: lr.Conversations, FrameBytes: lr.FrameBytes,
		Publishers: publishers, Batched: batch, ClientsInProcess: t.inProcess}
	rate := lr.TokensPerSec
	if rate <= 0 || lr.Conversations == 0 {
		return res, nil
	}
	channel := func(i int) string { return "bench-" + strconv.Itoa(i) }
	job := clientJob{Kind: clientCentrifugo, Base: c.base, FrameBytes: lr.FrameBytes}
	for s := range lr.Streams {
		job.Targets = append(job.Targets, channel(s/max(1, lr.StreamsPerConv)))
	}
	cl, err := startClients(ctx, job, t.inProcess, t.stderr)
	if err != nil {
		return res, err
	}
	defer cl.close()
	pad := strings.Repeat("x", max(0, lr.FrameBytes-32))
	// The publishers: each takes the next due publication (its channel),
	// or with batch the next millisecond's (their channels).
	jobs := make(chan []int, 1024)
	var published, dropped atomic.Int64
	var failed atomic.Value
	var pubs sync.WaitGroup
	for range publishers {
		pubs.Go(func() {
			for chans := range jobs {
				if batch {
					n, err := c.publishBatch(ctx, chans, channel, pad)
					if err != nil {
						failed.Store(err)
					}
					published.Add(int64(n))
					continue
				}
				for _, ch := range chans {
					if err := c.publish(ctx, channel(ch), pad); err != nil {
						failed.Store(err)
						continue
					}
					published.Add(1)
				}
			}
		})
	}
	// Pace the publications over the run: every millisecond, the ones due,
	// in one job with batch, else a job each.
	start := time.Now()
	offer := func(chans []int) {
		select {
		case jobs <- chans:
		default: // the publishers are behind: the offer is what they take
			dropped.Add(int64(len(chans)))
		}
	}
	tick := time.NewTicker(time.Millisecond)
	sent := 0
	for time.Since(start) < t.length() {
		<-tick.C
		due := int(rate * time.Since(start).Seconds())
		if due <= sent {
			continue
		}
		chans := make([]int, 0, due-sent)
		for ; sent < due; sent++ {
			chans = append(chans, sent%lr.Conversations)
		}
		if batch {
			offer(chans)
			continue
		}
		for i := range chans {
			offer(chans[i : i+1])
		}
	}
	tick.Stop()
	close(jobs)
	pubs.Wait()
	elapsed := time.Since(start)
	time.Sleep(time.Second) // the last publications reach their subscribers
	if err, ok := failed.Load().(error); ok && published.Load() == 0 {
		return res, err
	}
	// The publishers offer the full rate from their start: the same
	// window as the daemon's turns once the warm-up is over.
	cr, err := cl.stop(start.Add(t.warmUp), start.Add(t.length()))
	if err != nil {
		return res, err
	}
	res.Frames = cr.Frames.Count
	res.PublishedSec = float64(published.Load()) / elapsed.Seconds()
	res.Dropped = dropped.Load()
	res.PublishersBehind = res.PublishedSec < 0.95*rate
	res.DeliveriesSec = cr.Frames.PerSec
	res.P50Ms, res.P99Ms, res.P999Ms = cr.Frames.P50Ms, cr.Frames.P99Ms, cr.Frames.P999Ms
	res.StudioP50Ratio, res.StudioP99Ratio, res.StudioP999Ratio = ratio(lr.FrameP50Ms, res.P50Ms), ratio(lr.FrameP99Ms, res.P99Ms), ratio(lr.FrameP999Ms, res.P999Ms)
	return res, nil
}

// ratio is a / b, or 0 when b is.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// runPeer runs the peer after the daemon's frame latency runs, one run for
// each of them.
func runPeer(ctx context.Context, o Options, t timing, dir string, res *Result, p progress) error {
	c, err := startCentrifugo(ctx, o.Centrifugo, dir)
	if err != nil {
		return err
	}
	defer c.stop()
	p.say("centrifugo: pid %d at %s", c.cmd.Process.Pid, c.base)
	for _, lr := range res.Latency {
		p.say("centrifugo: %d streams on %d channels, %.0f frames/s of %s offered for %s", lr.Streams, lr.Conversations, lr.TokensPerSec, byteSize(lr.FrameBytes), t.length())
		publishers := o.PeerPublishers
		if publishers <= 0 {
			publishers = DefaultPeerPublishers
		}
		pr, err := c.latency(ctx, lr, t, publishers, o.PeerBatch)
		if err != nil {
			return err
		}
		res.Peer = append(res.Peer, pr)
		p.say("centrifugo: publish -> client p50 %.2f ms, p99 %.2f ms, p999 %.2f ms (%d frames); the daemon's are %.1f / %.1f / %.1f x",
			pr.P50Ms, pr.P99Ms, pr.P999Ms, pr.Frames, pr.StudioP50Ratio, pr.StudioP99Ratio, pr.StudioP999Ratio)
		if pr.PublishersBehind {
			p.say("centrifugo: the publishers were behind (%.0f of %.0f/s published, %d dropped): the bench process limited this run", pr.PublishedSec, lr.TokensPerSec, pr.Dropped)
		}
	}
	return nil
}
