package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/studio/operator/internal/frametrace"
	"github.com/studio/operator/internal/protocol"
)

// The streams' clients of a latency run: the connections that read the
// frames and time them. By default they run in a process of their own
// (`studio bench clients`, this binary re-executed), so that neither the
// servers nor the peer's publishers share a Go runtime, a scheduler or a
// collector with them, as a user's browsers would not. The parent speaks
// to them over the child's stdin and stdout, one line each way:
//
//	parent → child  a clientJob (JSON)
//	child → parent  "ready": every stream is open
//	child → parent  "ended": every stream ended by itself (a daemon's done frames)
//	parent → child  a clientStop (JSON): the window to measure
//	child → parent  a clientResult (JSON), then the child exits
//
// In-process (--clients in-process, the old way) the same code runs on
// pipes in a goroutine of the bench process.

// Client kinds: what the streams are and how they are timed.
const (
	// clientDaemon streams are the daemon's conversation streams, timed by
	// each frame's createdAt and each token's stamp.
	clientDaemon = "daemon"
	// clientCentrifugo streams are Centrifugo uni_sse connections, timed
	// by each publication's stamp "t".
	clientCentrifugo = "centrifugo"
)

// clientJob is what the clients open: one stream per target (a
// conversation ID or a channel), on base.
type clientJob struct {
	Kind       string   `json:"kind"`
	Base       string   `json:"base"`
	Token      string   `json:"token,omitempty"`
	Targets    []string `json:"targets"`
	FrameBytes int      `json:"frameBytes"`
}

// clientStop ends the clients' reading and names the window their figures
// are taken over (Unix nanoseconds).
type clientStop struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// clientStats are one kind of arrival's figures over the window.
type clientStats struct {
	Count  int     `json:"count"`
	PerSec float64 `json:"perSec"`
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
}

// clientResult is what the clients measured: frames (a daemon's frames, a
// peer's publications) and tokens (a daemon's stamps in the frames' text).
type clientResult struct {
	Frames clientStats `json:"frames"`
	Tokens clientStats `json:"tokens"`
	Error  string      `json:"error,omitempty"`
}

func statsOf(streams [][]arrival, from, to time.Time) clientStats {
	lat, perSec := window(streams, from, to)
	return clientStats{Count: len(lat), PerSec: perSec, P50Ms: pctMs(lat, 50), P99Ms: pctMs(lat, 99), P999Ms: pctMs(lat, 99.9)}
}

// RunClients is `studio bench clients`: it reads a clientJob from in,
// opens its streams, and answers on out as the protocol above says.
func RunClients(in io.Reader, out io.Writer) error {
	raiseFileLimit()
	lines := bufio.NewReader(in)
	var job clientJob
	if err := readJSONLine(lines, &job); err != nil {
		return fmt.Errorf("bench clients: the job: %w", err)
	}
	frames, tokens := make([][]arrival, len(job.Targets)), make([][]arrival, len(job.Targets))
	conns := make([]net.Conn, 0, len(job.Targets))
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	var wg sync.WaitGroup
	for s, target := range job.Targets {
		conn, br, err := job.open(target)
		if err != nil {
			closeAll()
			wg.Wait()
			return writeJSONLine(out, clientResult{Error: fmt.Sprintf("stream %d: %v", s, err)})
		}
		conns = append(conns, conn)
		wg.Go(func() { job.read(br, &frames[s], &tokens[s]) })
	}
	var outMu sync.Mutex
	say := func(line string) {
		outMu.Lock()
		defer outMu.Unlock()
		io.WriteString(out, line+"\n") //nolint:errcheck // the parent reads or is gone
	}
	say("ready")
	ended := make(chan struct{})
	go func() { wg.Wait(); say("ended"); close(ended) }()
	var stop clientStop
	err := readJSONLine(lines, &stop)
	closeAll()
	<-ended
	if err != nil {
		return fmt.Errorf("bench clients: the stop: %w", err) // the parent is gone
	}
	from, to := time.Unix(0, stop.From), time.Unix(0, stop.To)
	res := clientResult{Frames: statsOf(frames, from, to), Tokens: statsOf(tokens, from, to)}
	outMu.Lock()
	defer outMu.Unlock()
	return writeJSONLine(out, res)
}

// open opens one stream and reads it up to its first event.
func (j clientJob) open(target string) (net.Conn, *bufio.Reader, error) {
	switch j.Kind {
	case clientDaemon:
		return openDaemonStream(j.Base, j.Token, target, 0)
	case clientCentrifugo:
		connect := `{"subs":{"` + target + `":{}}}`
		req := fmt.Sprintf("GET /connection/uni_sse?cf_connect=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", url.QueryEscape(connect))
		return openSSE(j.Base, req, "centrifugo subscribe", func(line string) bool {
			return strings.HasPrefix(line, "data: ") && strings.Contains(line, `"connect"`)
		})
	}
	return nil, nil, fmt.Errorf("unknown client kind %q", j.Kind)
}

// read times a stream's arrivals until it ends: a daemon's at its done
// frame, any at its connection's close.
func (j clientJob) read(br *bufio.Reader, frames, tokens *[]arrival) {
	rd := bufio.NewReaderSize(br, max(16<<10, j.FrameBytes+8<<10)) // a whole data line
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
		if j.Kind == clientCentrifugo {
			if ns, ok := jsonIntAfter(data, `"t":`); ok {
				*frames = append(*frames, arrival{now, now.Sub(time.Unix(0, ns))})
			}
			continue
		}
		if bytes.Contains(data, []byte(`"type":"done"`)) {
			return
		}
		if !bytes.Contains(data, []byte(`"role":"assistant"`)) {
			continue
		}
		if at, ok := jsonNumberAfter(data, `"createdAt":`); ok {
			*frames = append(*frames, arrival{now, now.Sub(protocol.Time(at))})
			if frametrace.On {
				conv, _ := jsonStringAfter(data, `"conversationId":"`)
				if seq, ok := jsonIntAfter(data, `"sequence":`); ok {
					frametrace.StampAt(protocol.Time(at), "created", string(conv), seq, seq)
					frametrace.StampAt(now, "received", string(conv), seq, seq)
				}
			}
		}
		if content, ok := jsonStringAfter(data, `"content":"`); ok {
			for tok := range bytes.SplitSeq(content, []byte(";")) {
				if len(tok) < 2 || tok[0] != 't' { // the padding
					continue
				}
				if ns, err := strconv.ParseInt(string(tok[1:]), 10, 64); err == nil {
					*tokens = append(*tokens, arrival{now, now.Sub(time.Unix(0, ns))})
				}
			}
		}
	}
}

// jsonIntAfter parses the integer that follows key in data, exactly (a
// float64 rounds nanosecond stamps to 256 ns).
func jsonIntAfter(data []byte, key string) (int64, bool) {
	raw, ok := jsonRawNumberAfter(data, key)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	return v, err == nil
}

// clients is the parent's side of one run's clients.
type clients struct {
	in    io.WriteCloser
	out   *bufio.Reader
	ended chan struct{} // closed when the child said "ended"
	res   chan clientResult
	wait  func() error // the child process or goroutine
}

// startClients starts job's clients, in a process of their own unless
// inProcess, and waits until every stream is open.
func startClients(ctx context.Context, job clientJob, inProcess bool, stderr io.Writer) (*clients, error) {
	c := &clients{ended: make(chan struct{}), res: make(chan clientResult, 1)}
	if inProcess {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := RunClients(inR, outW)
			outW.CloseWithError(io.EOF)
			inR.Close()
			done <- err
		}()
		c.in, c.out, c.wait = inW, bufio.NewReader(outR), func() error { return <-done }
	} else {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, self, "bench", "clients")
		cmd.Stderr = stderr
		if c.in, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		c.out, c.wait = bufio.NewReader(out), cmd.Wait
	}
	if err := writeJSONLine(c.in, job); err != nil {
		c.close()
		return nil, fmt.Errorf("bench clients: %w", err)
	}
	line, err := c.out.ReadString('\n')
	if line != "ready\n" {
		var res clientResult
		if json.Unmarshal([]byte(line), &res) == nil && res.Error != "" {
			err = errors.New(res.Error)
		}
		c.close()
		return nil, fmt.Errorf("bench clients did not open their streams: %v", err)
	}
	go c.listen()
	return c, nil
}

// listen reads the child's "ended" and its result.
func (c *clients) listen() {
	defer close(c.res)
	line, err := c.out.ReadString('\n')
	if err != nil {
		return
	}
	if line == "ended\n" {
		close(c.ended)
		if line, err = c.out.ReadString('\n'); err != nil {
			return
		}
	}
	var res clientResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		res.Error = fmt.Sprintf("bench clients: %q: %v", line, err)
	}
	c.res <- res
}

// stop ends the clients' reading and returns their figures over [from, to].
func (c *clients) stop(from, to time.Time) (clientResult, error) {
	defer c.close()
	if err := writeJSONLine(c.in, clientStop{From: from.UnixNano(), To: to.UnixNano()}); err != nil {
		return clientResult{}, fmt.Errorf("bench clients: %w", err)
	}
	res, ok := <-c.res
	if !ok {
		return res, errors.New("bench clients ended without their figures")
	}
	if res.Error != "" {
		return res, errors.New(res.Error)
	}
	return res, nil
}

// close closes the child's stdin (a child not yet stopped exits) and waits
// for it.
func (c *clients) close() {
	c.in.Close()
	_ = c.wait()
}

func readJSONLine(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return err
	}
	return json.Unmarshal(line, v)
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
