package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// Fencing: how an owner that lost its work is kept from writing.
//
// Ownership of a turn, of a confirmed proposal and of a run names an
// instance (owner_instance) and carries an epoch (owner_epoch) that every
// change of owner increases: a claim, a takeover by a reaper, a
// confirmation, a hand-over. A reaped instance never owns anything again
// (a daemon that lost its lease rejoins as a new instance), so the pair is
// a fencing token in the sense of Kleppmann's: a writer that holds an old
// one is refused.
//
// An owner's writes carry its Fence in their context (WithFence). Every
// write transaction that carries one checks it first, in the transaction:
// the writer can prove its lease current (Lease, a bound the daemon knows
// locally), the instance is neither reaped nor stopped and, for the
// execution of a confirmed command, the proposal is still executing under
// that instance and epoch — with the proposal's row locked until the
// commit, so a reaper's takeover (which rewrites that row) and the
// command's own writes are ordered one way or the other, never both. A
// takeover that commits first leaves the command unrun for ever; a
// command that commits first is there for the takeover to see, with the
// marker it set (Proposal.ExecutedAt). The instance's own row is only
// read: a reaping waits on no session of the daemon it reaps.

// Fence is what an owner's write must still hold when it commits.
type Fence struct {
	// Instance must be live: not reaped, not stopped.
	Instance string
	// Hold marks a write that takes work over or starts it (a
	// confirmation, a claim, a takeover): it never joins a batch of
	// appends, and its writer sets Lease.
	Hold bool
	// Lease, when set, says whether the writer can prove its lease current
	// (lease.Keeper.Held at the moment of the check); it runs first in the
	// transaction. A refusal is LeaseUnproven: transient, since the writer
	// may yet renew. So no confirmation, claim or execution starts on a
	// lease that ran out, whatever the database says about it.
	Lease func() error
	// ProposalID, when set, must be executing, owned by Instance at
	// ProposalEpoch: the fence of a confirmed command's execution and of
	// the recording of its outcome.
	ProposalID    string
	ProposalEpoch int64
	// Execute marks the transaction as the command's own write: the
	// proposal must not have executed yet, and the transaction records
	// that it did (Proposal.ExecutedAt) — at most once, whatever retries.
	Execute bool
	// Now stamps ExecutedAt.
	Now time.Time
}

// AlreadyExecuted is the error of a command's write whose proposal has
// executed already: an earlier try committed although its answer was
// lost. The command ran once; its result is unknown.
func AlreadyExecuted(proposalID string) *protocol.Error {
	return protocol.Errorf(protocol.Conflict, "proposal %s executed already; its result was not recorded", proposalID).
		With("reason", "executed").With("proposalId", proposalID)
}

// IsAlreadyExecuted reports whether err is AlreadyExecuted.
func IsAlreadyExecuted(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == protocol.Conflict && pe.Details["reason"] == "executed"
}

type fenceKey struct{}

// WithFence returns ctx carrying f: the store checks it in every write
// transaction made with the context.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence ctx carries.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok && f.Instance != ""
}

// leaseReason is the details.reason of LeaseUnproven.
const leaseReason = "lease_unproven"

// LeaseUnproven is the refusal of a writer that cannot prove its lease
// current (its renewals fail: the database, or the way to it, hangs). It
// is transient: the write may pass once the lease is renewed; if the
// daemon is reaped first, its fence refuses it for good.
func LeaseUnproven(instance string, why error) *protocol.Error {
	return protocol.Errorf(protocol.ServiceFailure, "this daemon cannot prove its lease is current (%v): it executes, claims and decides nothing until it renews; try another daemon or again shortly", why).
		With("reason", leaseReason).With("instance", instance)
}

// IsLeaseUnproven reports whether err is LeaseUnproven.
func IsLeaseUnproven(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == protocol.ServiceFailure && pe.Details["reason"] == leaseReason
}

// fencedReason is the details.reason of a write refused by its fence.
const fencedReason = "fenced"

// Fenced is the error of a write refused by its fence: the writer lost
// the work it was doing (another daemon took it over) and must stop.
func Fenced(format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.Conflict, format, args...).With("reason", fencedReason)
}

// IsFenced reports whether err is a write refused by its fence.
func IsFenced(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == protocol.Conflict && pe.Details["reason"] == fencedReason
}

// CommitUnknownError is a write transaction whose COMMIT was sent but not
// answered (the connection dropped): it may or may not have landed. The
// writer re-reads what it wrote before it tries again.
type CommitUnknownError struct{ Err error }

func (e *CommitUnknownError) Error() string { return "commit outcome unknown: " + e.Err.Error() }
func (e *CommitUnknownError) Unwrap() error { return e.Err }

// IsCommitUnknown reports whether err is a CommitUnknownError.
func IsCommitUnknown(err error) bool {
	var e *CommitUnknownError
	return errors.As(err, &e)
}

// Transient reports whether err says the database is unavailable for now
// rather than that the write is wrong: a connection refused or dropped, a
// server shutting down or starting (a restart, a failover), a lock or
// statement timeout, a serialization failure or deadlock, SQLite's busy,
// a writer whose lease is unproven for now. The same write may succeed
// later; other typed errors of the protocol (a conflict, not found) never
// are transient.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return IsLeaseUnproven(err)
	}
	if IsCommitUnknown(err) {
		return true
	}
	// PostgreSQL's SQLSTATE, without importing its driver.
	var state interface{ SQLState() string }
	if errors.As(err, &state) {
		code := state.SQLState()
		switch {
		case strings.HasPrefix(code, "08"): // connection exception
			return true
		case strings.HasPrefix(code, "57P"): // admin/crash shutdown, cannot connect now
			return true
		}
		switch code {
		case "40001", "40P01", // serialization failure, deadlock
			"55P03", // lock_not_available: lock_timeout
			"57014", // query_canceled: statement_timeout
			"25P03", // idle_in_transaction_session_timeout
			"53300", // too_many_connections
			"53400": // configuration_limit_exceeded
			return true
		}
		return false
	}
	// SQLite's result codes (the low byte is the primary code).
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
	}
	var safe interface{ SafeToRetry() bool }
	if errors.As(err, &safe) && safe.SafeToRetry() {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgx reports a connection it closed under a statement as text only.
	msg := err.Error()
	for _, s := range []string{"conn closed", "connection reset", "broken pipe", "unexpected EOF", "server closed the connection",
		"the database system is shutting down", "the database system is starting up", "failed to connect", "connection refused"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// The backoff between two tries of a write while the database is away:
// from FirstOutageBackoff, doubling, up to MaxOutageBackoff.
const (
	FirstOutageBackoff = 50 * time.Millisecond
	MaxOutageBackoff   = 2 * time.Second
)

// RideOut runs write until it succeeds, fails with an error that is not
// Transient, or the database has been unavailable for longer than budget:
// a restart or failover of the database is waited out, with a backoff from
// 50 ms doubling to 2 s. retrying, when set, hears of each wait; ctx or
// quit ends the waiting early. A write whose commit went unanswered is
// tried again as it is: use it only for writes that a retry cannot apply
// twice (a fenced command's, a compare-and-set's).
func RideOut(ctx context.Context, budget time.Duration, quit <-chan struct{}, retrying func(wait time.Duration, err error),
	write func(context.Context) error) error {
	start, wait := time.Now(), FirstOutageBackoff
	for {
		err := write(ctx)
		if !Transient(err) || time.Since(start)+wait > budget || ctx.Err() != nil {
			return err
		}
		if retrying != nil {
			retrying(wait, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		case <-quit:
			t.Stop()
			return err
		}
		wait = min(2*wait, MaxOutageBackoff)
	}
}
