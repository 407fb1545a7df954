package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/postgres"
	"github.com/studio/operator/internal/store/sqlite"
)

// fsyncRate is how many write+fsync pairs a file in dir takes per second
// (the most durable commits the disk allows one writer) and how long each
// pair took: no frame is sent before its commit's fsync, so those are the
// floor of a frame's latency.
func fsyncRate(dir string, d time.Duration) (syncStats, error) {
	return syncLoop(dir, 512, d)
}

// BandwidthWrite is what each fsync of the bandwidth probe carries: enough
// that the disk's transfer rate, not its flush latency, bounds the loop.
const BandwidthWrite = 512 << 10

// diskBandwidth is the bytes per second a file in dir takes when each
// fsync carries BandwidthWrite bytes: the most a durable writer that fills
// its commits can hope for.
func diskBandwidth(dir string, d time.Duration) (float64, error) {
	st, err := syncLoop(dir, BandwidthWrite, d)
	return st.bytesPerSec, err
}

// syncLoopSpan is where syncLoop's file wraps around: the loop keeps
// writing new blocks (as a log does) without filling the disk.
const syncLoopSpan = 64 << 20

// syncStats is what a write+fsync loop measured: pairs and bytes per
// second, and the percentiles of one pair's time.
type syncStats struct {
	perSec, bytesPerSec float64
	p50, p99, p999      float64 // ms
}

// syncLoop writes size bytes then fsyncs, in a loop for d, and returns the
// pairs and the bytes per second, and each pair's time.
func syncLoop(dir string, size int, d time.Duration) (syncStats, error) {
	f, err := os.CreateTemp(dir, "fsync-*")
	if err != nil {
		return syncStats{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := bytes.Repeat([]byte{'x'}, size)
	var took []time.Duration
	off, start := int64(0), time.Now()
	for time.Since(start) < d {
		t := time.Now()
		if _, err := f.WriteAt(buf, off); err != nil {
			return syncStats{}, err
		}
		if err := f.Sync(); err != nil {
			return syncStats{}, err
		}
		took = append(took, time.Since(t))
		if off += int64(size); off+int64(size) > syncLoopSpan {
			off = 0
		}
	}
	secs := time.Since(start).Seconds()
	n := float64(len(took))
	return syncStats{perSec: n / secs, bytesPerSec: n * float64(size) / secs,
		p50: pctMs(took, 50), p99: pctMs(took, 99), p999: pctMs(took, 99.9)}, nil
}

// openBenchStore opens and migrates the store at path: a SQLite file, or
// with a postgres:// URL the PostgreSQL database of `bench --database`.
func openBenchStore(ctx context.Context, path string) (store.Store, error) {
	var st interface {
		store.Store
		Migrate(context.Context, time.Time) (int, error)
	}
	var err error
	if isPostgresURL(path) {
		st, err = postgres.Open(ctx, path)
	} else {
		st, err = sqlite.Open(path)
	}
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

// endTurns completes the turns of an append run on PostgreSQL, whose
// database the bench daemon serves next (a SQLite run's file is removed):
// left queued, the daemon would claim and run every one of them while the
// idle streams are measured, and that work would read as their memory.
func endTurns(ctx context.Context, st store.Store, path string, convs [][2]string) error {
	if !isPostgresURL(path) {
		return nil
	}
	return inParallel(len(convs), func(i int) error {
		_, _, err := st.FinishTurn(ctx, store.FinishTurnParams{RequestID: convs[i][1], Status: store.TurnCompleted, Now: time.Now()})
		return err
	})
}

// appendRate is durable appends per second (one frame per AppendFrames,
// each returned after its commit) by n concurrent conversations, each
// frame's text padded to size bytes (0: a line of ordinary length).
func appendRate(ctx context.Context, path string, n, size int, d time.Duration) (float64, error) {
	st, err := openBenchStore(ctx, path)
	if err != nil {
		return 0, err
	}
	defer removeBenchStore(path)
	defer st.Close()
	convs, err := activeConversations(ctx, st, n)
	if err != nil {
		return 0, err
	}
	text := "a line of model output of ordinary length, streamed."
	if size > len(text) {
		text += strings.Repeat("x", size-len(text))
	}
	frame := []store.NewFrame{{Payload: protocol.TextPayload{Content: text, Format: "markdown", Role: protocol.RoleAssistant}}}
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
	rate := float64(count.Load()) / time.Since(start).Seconds()
	return rate, endTurns(ctx, st, path, convs)
}

// pipelinedRate is durable frames per second of one conversation whose
// turn does not wait for each commit, as a turn's owner appends: a
// producer queues frames as fast as it makes them, and one append at a
// time stores everything queued since the last one. Each frame is still
// on disk before AppendFrames returns it (and before any stream sees it).
func pipelinedRate(ctx context.Context, path string, d time.Duration) (float64, error) {
	st, err := openBenchStore(ctx, path)
	if err != nil {
		return 0, err
	}
	defer removeBenchStore(path)
	defer st.Close()
	convs, err := activeConversations(ctx, st, 1)
	if err != nil {
		return 0, err
	}
	frame := store.NewFrame{Payload: protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: protocol.RoleAssistant}}
	const maxQueued = 1024 // of the order of a turn owner's bounds (1 024 frames or 64 KiB: ~560 frames this small)
	var mu sync.Mutex
	ready := sync.NewCond(&mu)
	queued, stop := 0, false
	go func() { // the producer
		for {
			mu.Lock()
			for queued >= maxQueued && !stop {
				ready.Wait()
			}
			if stop {
				mu.Unlock()
				return
			}
			queued++
			ready.Broadcast()
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		stop = true
		ready.Broadcast()
		mu.Unlock()
	}()
	stored, start := 0, time.Now()
	batch := make([]store.NewFrame, 0, maxQueued)
	for time.Since(start) < d {
		mu.Lock()
		for queued == 0 {
			ready.Wait()
		}
		n := queued
		queued = 0
		ready.Broadcast()
		mu.Unlock()
		batch = batch[:0]
		for range n {
			batch = append(batch, frame)
		}
		if _, err := st.AppendFrames(ctx, store.AppendFramesParams{ConversationID: convs[0][0], RequestID: convs[0][1], Frames: batch, Now: time.Now()}); err != nil {
			return 0, err
		}
		stored += n
	}
	rate := float64(stored) / time.Since(start).Seconds()
	return rate, endTurns(ctx, st, path, convs)
}

// prepareReplay writes the daemon's database (path) with one conversation
// of n frames; the store stays open for storeReadRate.
func prepareReplay(ctx context.Context, daemonDir, path string, n int) (store.Store, string, error) {
	if err := os.MkdirAll(daemonDir, 0o700); err != nil {
		return nil, "", err
	}
	st, err := openBenchStore(ctx, path)
	if err != nil {
		return nil, "", err
	}
	conv, err := writeReplay(ctx, st, n)
	if err != nil {
		st.Close()
		return nil, "", err
	}
	return st, conv, nil
}

func writeReplay(ctx context.Context, st store.Store, n int) (string, error) {
	convs, err := activeConversations(ctx, st, 1)
	if err != nil {
		return "", err
	}
	conv, rid := convs[0][0], convs[0][1]
	batch := make([]store.NewFrame, 500)
	for i := range batch {
		batch[i] = store.NewFrame{Payload: protocol.TextPayload{Content: "a line of model output of ordinary length, streamed.", Format: "markdown", Role: protocol.RoleAssistant}}
	}
	for written := 1; written < n-1; written += len(batch) {
		b := batch[:min(len(batch), n-1-written)]
		if _, err := st.AppendFrames(ctx, store.AppendFramesParams{ConversationID: conv, RequestID: rid, Frames: b, Now: time.Now()}); err != nil {
			return "", err
		}
	}
	if _, _, err := st.FinishTurn(ctx, store.FinishTurnParams{RequestID: rid, Status: store.TurnCompleted, Now: time.Now()}); err != nil {
		return "", err
	}
	return conv, nil
}

// replayPage is the frames of one store read: the daemon's stream reads
// pages of the same size (httpapi's replayPage), so the two figures read
// the same frames the same way.
const replayPage = 500

// storeReadRate times reading the conversation back from the store alone,
// a page at a time, from cursor 0 as the stream does.
func storeReadRate(ctx context.Context, st store.Store, conv string) (float64, error) {
	start, after, read := time.Now(), int64(0), 0
	for {
		fs, err := st.ListFrames(ctx, store.ListFramesParams{ConversationID: conv, AfterSequence: after, Limit: replayPage})
		if err != nil {
			return 0, err
		}
		if len(fs) == 0 {
			break
		}
		read += len(fs)
		after = fs[len(fs)-1].Sequence
	}
	return float64(read) / time.Since(start).Seconds(), nil
}
