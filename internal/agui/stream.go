package agui

import (
	"context"
	"net/http"
	"time"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/sse"
)

// runWriter writes a run's events.
type runWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     []byte
	err     error
}

func (s *runWriter) event(e Event) {
	if s.err != nil {
		return
	}
	s.buf, s.err = AppendSSE(s.buf, e)
}

func (s *runWriter) comment(c string) {
	s.buf = append(s.buf, ": "+c+"\n\n"...)
}

// flush writes what is buffered within the write timeout: a client that
// does not read is cut off, never buffered for.
func (s *runWriter) flush() bool {
	if s.err != nil {
		return false
	}
	if len(s.buf) == 0 {
		return true
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = err
		return false
	}
	s.buf = s.buf[:0]
	s.err = s.rc.Flush()
	return s.err == nil
}

// stream answers the run: RUN_STARTED, the events of its frames after the
// cursor as they commit, and the event that ends it. Frames are read from
// the store, where they are durable, and the feed only wakes the run up.
func (d *Door) stream(w http.ResponseWriter, r *http.Request, rn *run) error {
	ctx := r.Context()
	convs := d.cfg.Conversations
	// Subscribe before reading: whatever commits after a read wakes it.
	sub := convs.Subscribe(rn.convID)
	defer sub.Close()
	snap, err := d.history(ctx, rn)
	if err != nil {
		return err
	}
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	out := &runWriter{w: w, rc: http.NewResponseController(w), timeout: d.cfg.WriteTimeout}
	defer func() { _ = out.rc.SetWriteDeadline(time.Time{}) }()
	out.event(rn.m.started())
	if snap != nil {
		out.event(snap.snapshot())
	}
	if rn.requestID == "" {
		// A history run: no turn to follow.
		e := ev(RunFinished, "threadId", rn.m.threadID, "runId", rn.m.runID, "outcome", map[string]any{"type": "success"})
		if rn.m.result != nil {
			e.Fields["result"] = rn.m.result
		}
		out.event(e)
		out.flush()
		return nil
	}
	if !out.flush() {
		return nil
	}
	beat := time.NewTicker(d.cfg.Heartbeat)
	defer beat.Stop()
	access := d.accessSignal() // before reading: no revocation is missed
	pos, writing := rn.after, rn.cursor <= rn.after
	for {
		frames, err := convs.ReadFrames(ctx, rn.convID, pos, page)
		if err != nil {
			if ctx.Err() == nil {
				d.fail(out, err)
			}
			return nil
		}
		for _, raw := range frames {
			pos = raw.Sequence
			if raw.RequestID != rn.requestID {
				continue
			}
			f, err := frameOf(raw)
			if err != nil {
				d.fail(out, err)
				return nil
			}
			var reopened []Event
			if !writing && f.Sequence > rn.cursor {
				// The first frame after the cursor: what the client had
				// open on the connection it lost is opened again.
				writing, reopened = true, rn.m.reopen()
			}
			evs, end := rn.m.frame(f)
			evs = append(reopened, evs...)
			if writing {
				for i, e := range evs {
					if i == len(evs)-1 {
						e.Seq = f.Sequence
					}
					out.event(e)
				}
			}
			if end {
				if !writing {
					// The client had the run's end: a run ends with it.
					e := evs[len(evs)-1]
					e.Seq = f.Sequence
					out.event(e)
				}
				out.flush()
				return nil
			}
		}
		if !out.flush() {
			return nil
		}
		if len(frames) == page {
			continue
		}
		select {
		case <-sub.Ready():
		case <-beat.C:
			out.comment("heartbeat")
			if !out.flush() {
				return nil
			}
		case <-access:
			access = d.accessSignal()
			if err := d.cfg.StillAllowed(ctx, rn.convID, policy.Converse); err != nil {
				d.fail(out, err)
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// accessSignal is the access change's signal, nil (never) without one.
func (d *Door) accessSignal() <-chan struct{} {
	if d.cfg.AccessSignal == nil || d.cfg.StillAllowed == nil {
		return nil
	}
	return d.cfg.AccessSignal()
}

// history is the conversation's messages for a run that asks for its
// snapshot (nil for one that does not), read through a mapper of its own
// so that ids match the runs'.
func (d *Door) history(ctx context.Context, rn *run) (*history, error) {
	if !rn.snapshot {
		return nil, nil
	}
	snap := newHistory(newMapper(rn.m.threadID, rn.m.runID, rn.convID, rn.m.base, rn.m.frontend))
	err := d.scan(ctx, rn.convID, func(f protocol.RawFrame) bool {
		if fr, err := frameOf(f); err == nil {
			snap.add(fr)
		}
		return true
	})
	return snap, err
}

// fail ends a run whose frames could not be read with RUN_ERROR: the
// client sends the run again, after its last event id.
func (d *Door) fail(out *runWriter, err error) {
	pe := protocol.ErrorOf(err)
	if pe.Code == protocol.ServiceFailure {
		d.cfg.Logger.Error("agui run", "err", err)
	}
	out.event(runError(pe))
	out.flush()
}

// frameOf decodes a stored frame.
func frameOf(raw protocol.RawFrame) (protocol.Frame, error) {
	p, err := protocol.DecodePayload(raw.Type, raw.Payload)
	if err != nil {
		return protocol.Frame{}, err
	}
	return protocol.Frame{Version: raw.Version, ConversationID: raw.ConversationID, RequestID: raw.RequestID,
		Sequence: raw.Sequence, Type: raw.Type, Payload: p, CreatedAt: raw.CreatedAt}, nil
}
