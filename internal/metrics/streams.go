package metrics

import "time"

// StreamsOpen adds delta (1 when a stream starts, -1 when it ends) to the
// open SSE streams.
func (r *Registry) StreamsOpen(delta int) {
	if r == nil {
		return
	}
	r.streamsOpen.Add(float64(delta))
}

// StreamClosed records an SSE stream's lifetime and why it ended.
func (r *Registry) StreamClosed(reason string, d time.Duration) {
	if r == nil {
		return
	}
	r.streamLifetime.WithLabelValues(reason).Observe(max(d, 0).Seconds())
}

// FramesStreamed records frames written to a stream.
func (r *Registry) FramesStreamed(n int) {
	if r == nil || n <= 0 {
		return
	}
	r.framesStreamed.Add(float64(n))
}

// StreamStoreReads records store reads by streams.
func (r *Registry) StreamStoreReads(n int) {
	if r == nil || n <= 0 {
		return
	}
	r.streamReads.Add(float64(n))
}

// CommitToFlush records the time from a frame's commit to its flush.
func (r *Registry) CommitToFlush(d time.Duration) {
	if r == nil {
		return
	}
	r.commitToFlush.Observe(max(d, 0).Seconds())
}
