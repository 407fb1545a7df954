package httpapi

import (
	"time"

	"github.com/studio/operator/internal/protocol"
)

// The stream's lease comment. A daemon that shares its database (several
// daemons on one PostgreSQL) and cannot prove its lease current fences
// itself: it decides, claims and executes nothing until it renews (the
// decisions it is sent answer 503 service_failure with a retry hint). Its
// streams say so, as an SSE comment, when they open in that state and
// whenever it changes:
//
//	: lease {"state":"unproven","retryAfterMs":1000,"message":"…"}
//	: lease {"state":"held"}
//
// A client may take its decisions to another daemon meanwhile; frames go
// on as they commit. A comment, as the status is: no id, no cursor.

// leaseRetryAfter is the retry hint the comment gives: about a renewal.
const leaseRetryAfter = time.Second

// LeaseWatcher is a LeaseHolder that tells when Held changes
// (lease.Keeper).
type LeaseWatcher interface {
	LeaseHolder
	Changed() <-chan struct{}
}

// leaseState is what a stream last said about the lease.
type leaseState struct {
	said bool // something was said: a renewal is worth saying too
	last string
}

// leaseChanged is the channel closed at the next change of the lease, or
// nil (never) without a watcher.
func (s *Server) leaseChanged() <-chan struct{} {
	if w, ok := s.cfg.Lease.(LeaseWatcher); ok {
		return w.Changed()
	}
	return nil
}

// write sends the lease comment when it differs from the last one sent
// (and, when it was never sent, only while the lease is unproven); it
// reports whether it wrote anything.
func (ls *leaseState) write(st *stream) bool {
	if st.s.cfg.Lease == nil {
		return false
	}
	var v struct {
		State        string `json:"state"`
		RetryAfterMs int64  `json:"retryAfterMs,omitzero"`
		Message      string `json:"message,omitzero"`
	}
	if err := st.s.cfg.Lease.Held(time.Now()); err != nil {
		v.State, v.RetryAfterMs = "unproven", leaseRetryAfter.Milliseconds()
		v.Message = "this daemon cannot prove its lease (" + err.Error() + "): it decides, claims and executes nothing until it renews; decide on another daemon meanwhile"
	} else {
		if !ls.said {
			return false
		}
		v.State = "held"
	}
	b, err := protocol.Marshal(v)
	if err != nil || string(b) == ls.last {
		return false
	}
	ls.said, ls.last = true, string(b)
	st.write([]byte(": lease "))
	st.write(b)
	st.write([]byte("\n\n"))
	return true
}
