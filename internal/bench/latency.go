package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
)

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

// StampBytes is the length of an unpadded token: "t", the Unix time in
// nanoseconds (19 digits), ";".
const StampBytes = 21

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
	r := benchLatency{perConv: 10, bytes: StampBytes}
	rest, size, sized := strings.Cut(spec, "x")
	if sized {
		b, err := strconv.Atoi(size)
		if err != nil {
			return r, bad
		}
		if b < StampBytes {
			return r, fmt.Errorf("--latency %q: BYTES must be at least %d (the token's time stamp)", spec, StampBytes)
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

func latencyRuns(o Options) ([]benchLatency, error) {
	var runs []benchLatency
	for _, spec := range o.Latency {
		r, err := parseLatencyRun(spec)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	// The token -> screen run: the first latency run's load, coalesced;
	// none with --text-flush 0.
	if len(runs) > 0 && o.TextFlush > 0 {
		t := runs[0]
		t.textFlush = true
		runs = append(runs, t)
	}
	return runs, nil
}

// submitAllowance is how much longer than the run's length a turn of r
// plays: its window opens only once every turn is submitted (a few
// commits each, 32 at a time: 2-3 ms per turn on a quiet machine, 15 ms at
// load 15), so that a slow submission of many turns shifts the measured
// span instead of shortening it. The bench cancels every turn at the
// window's end.
func (r benchLatency) submitAllowance() time.Duration {
	return time.Duration(r.convs) * 20 * time.Millisecond
}

// phases is how many start offsets run r's turns are spread over: one a
// millisecond of a conversation's period, at most one a conversation
// and 1 000 in all.
// Turns submitted together (32 at a time) would otherwise emit together
// every period, bursts of dozens of frames in a millisecond, where the
// peer's publishers offer the same rate evenly (two a millisecond at
// 1 000 streams x 2 000/s).
func (r benchLatency) phases() int {
	_, ms := r.pace()
	return max(1, min(r.convs, int(ms), 1000))
}

// instruction is what conversation j of run i submits: it picks the
// run's turn and its phase.
func (r benchLatency) instruction(i, j int) string {
	return fmt.Sprintf("bench-run-%d.p%d;", i, j%r.phases())
}

// writeBenchScript writes the script model's turns: turn i emits tokens
// stamped with their time (padded to run i's size) at its share of run
// i's rate, for d and the run's submitAllowance, each of its phases
// starting that part of the period late.
func writeBenchScript(path string, runs []benchLatency, d time.Duration) error {
	var s script.Script
	for i, r := range runs {
		tokens, ms := r.pace()
		steps := int((d + r.submitAllowance()) / time.Duration(ms*int64(time.Millisecond)))
		tok := "t" + script.EmittedAt + ";" + strings.Repeat("x", r.bytes-StampBytes)
		var body []script.Step
		for range max(1, steps) {
			for range tokens {
				body = append(body, script.Step{Text: &tok})
			}
			body = append(body, script.Step{SleepMs: &ms})
		}
		for k := range r.phases() {
			// Paced: the turn offers its rate even when the machine's
			// timers fire late (a 1 ms sleep takes 1.5-2 ms under load),
			// as the peer's publishers do.
			turn := script.Turn{Match: r.instruction(i, k), Paced: true}
			if offset := ms * int64(k) / int64(r.phases()); offset > 0 {
				turn.Steps = append(turn.Steps, script.Step{SleepMs: &offset})
			}
			turn.Steps = append(turn.Steps, body...)
			s.Turns = append(s.Turns, turn)
		}
	}
	b, err := protocol.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// timing is how a latency run is timed: a warm-up, then the measured
// span; and where its clients run (see clients.go).
type timing struct {
	warmUp, measure time.Duration
	inProcess       bool      // the clients in the bench process, not one of their own
	stderr          io.Writer // the clients process's
}

// length is the whole run: the warm-up and the measured span.
func (t timing) length() time.Duration { return t.warmUp + t.measure }

// latency runs one latency run: conversations with r.perConv streams
// each, one turn per conversation playing turn i of the script; every
// stream times each frame (its createdAt) and each token (its stamp) to its
// arrival. Turns still running after the run's length are cancelled, so a
// saturated run ends once its streams have caught up. One function because
// the streams, the turns and the cancel at the run's end share one run's
// state and deadline.
func (d *benchDaemon) latency(ctx context.Context, i int, r benchLatency, t timing, p progress) (latencyRun, error) {
	streams := r.convs * r.perConv
	res := latencyRun{Name: fmt.Sprintf("%d streams (%d/conversation) @ %.0f/s x %d B", streams, r.perConv, r.offered(), r.bytes),
		Streams: streams, StreamsPerConv: r.perConv, Conversations: r.convs, FrameBytes: r.bytes,
		TokensPerSec: r.offered(), OfferedSec: r.offered() * float64(r.perConv), ClientsInProcess: t.inProcess}
	ids, err := d.conversations(ctx, r.convs)
	if err != nil {
		return res, err
	}
	on := d
	if d.streamsOn != nil {
		on = d.streamsOn
	}
	job := clientJob{Kind: clientDaemon, Base: on.base, Token: on.token, FrameBytes: r.bytes}
	for s := range streams {
		job.Targets = append(job.Targets, ids[s/r.perConv])
	}
	cl, err := startClients(ctx, job, t.inProcess, t.stderr)
	if err != nil {
		return res, err
	}
	defer cl.close()
	reads0, _ := d.metric(ctx, "studio_operator_stream_store_reads_total")
	start := time.Now()
	requests := make([]string, len(ids))
	err = inParallel(len(ids), func(j int) error {
		zero := int64(0)
		acc, err := d.client.SubmitTurn(ctx, ids[j], protocol.TurnRequest{Instruction: r.instruction(i, j),
			Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero})
		requests[j] = acc.RequestID
		return err
	})
	if err != nil {
		return res, err
	}
	// Every turn plays its script from its own start, for the run's length
	// and its submitAllowance: all of them offer their rate from the last
	// submission on. The submissions' burst (10 000 turns claimed) is not
	// streaming's steady state, which the peer's figures are of: the
	// window opens once all turns run and the warm-up is over, and is the
	// measured duration long.
	submitted := time.Now()
	steady := submitted
	if warm := start.Add(t.warmUp); steady.Before(warm) {
		steady = warm
	}
	to := steady.Add(t.measure)
	select {
	case <-cl.ended:
	case <-time.After(time.Until(to)):
		// The run's time is up: turns a saturated daemon has not finished
		// are cancelled (a finished one answers its state).
		if err := inParallel(len(ids), func(j int) error {
			_, err := d.client.Cancel(ctx, ids[j], requests[j])
			return err
		}); err != nil {
			return res, err
		}
		select {
		case <-cl.ended:
		case <-time.After(2 * time.Minute):
			return res, errors.New("the streams did not end within 2 minutes of their turns' cancel")
		}
	}
	reads1, _ := d.metric(ctx, "studio_operator_stream_store_reads_total")
	p.say("latency: every turn submitted %.1fs into the run; measured from %.1fs to %.1fs", submitted.Sub(start).Seconds(), steady.Sub(start).Seconds(), to.Sub(start).Seconds())
	cr, err := cl.stop(steady, to)
	if err != nil {
		return res, err
	}
	// Tokens a late step coalesced into one frame still count one each,
	// as the peer's publications do.
	frames, tokens := cr.Frames, cr.Tokens
	res.Frames = frames.Count
	res.DeliveriesSec, res.TokenDeliveriesSec = frames.PerSec, tokens.PerSec
	res.FramesPerSec = res.DeliveriesSec / float64(r.perConv)
	res.FrameP50Ms, res.FrameP99Ms, res.FrameP999Ms = frames.P50Ms, frames.P99Ms, frames.P999Ms
	res.TokenP50Ms, res.TokenP99Ms, res.TokenP999Ms = tokens.P50Ms, tokens.P99Ms, tokens.P999Ms
	if res.Frames > 0 {
		res.StoreReadsPerF = (reads1 - reads0) / (float64(res.Frames) / float64(r.perConv))
	}
	return res, nil
}

// jsonNumberAfter parses the number that follows key in data.
func jsonNumberAfter(data []byte, key string) (float64, bool) {
	raw, ok := jsonRawNumberAfter(data, key)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return v, err == nil
}

// jsonRawNumberAfter is the text of the number that follows key in data
// (a frame's field, found without decoding the frame).
func jsonRawNumberAfter(data []byte, key string) ([]byte, bool) {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return nil, false
	}
	rest := data[i+len(key):]
	end := bytes.IndexAny(rest, ",}")
	if end < 0 {
		return nil, false
	}
	return rest[:end], true
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

// arrival is one timed delivery: when the client read it, and its latency.
type arrival struct {
	at time.Time
	d  time.Duration
}

// window turns a run's arrivals into its figures over [from, to], the
// part of the run when everything was offered at the full rate (all turns
// submitted, or the publishers running). Latencies are those of what was
// sent (a frame created, a publication stamped) in it, whenever it
// arrived: the start-up and what the run's end brings (the bench
// cancelling the turns still running) are left out, a saturated server's
// late arrivals are not. The delivery rate counts what was read in it,
// over its span. Rates over the whole run would count the turns'
// staggered start and the tail's catching up as time, and its frames as
// delivered, in proportions that differ between the daemon and the peer.
func window(streams [][]arrival, from, to time.Time) (lat []time.Duration, perSec float64) {
	var n int
	for _, s := range streams {
		for _, a := range s {
			if sent := a.at.Add(-a.d); !sent.Before(from) && !sent.After(to) {
				lat = append(lat, a.d)
			}
			if !a.at.Before(from) && !a.at.After(to) {
				n++
			}
		}
	}
	if span := to.Sub(from); span > 0 {
		perSec = float64(n) / span.Seconds()
	}
	return lat, perSec
}
