package store_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// sqlState is an error with a PostgreSQL SQLSTATE, as pgconn.PgError is.
type sqlState string

func (s sqlState) Error() string    { return "ERROR: (SQLSTATE " + string(s) + ")" }
func (s sqlState) SQLState() string { return string(s) }

// sqliteCode is an error with an SQLite result code, as modernc's is.
type sqliteCode int

func (c sqliteCode) Error() string { return fmt.Sprintf("sqlite error %d", int(c)) }
func (c sqliteCode) Code() int     { return int(c) }

func TestTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("syntax error"), false},
		{protocol.Errorf(protocol.Conflict, "turn already ended"), false},
		{store.Fenced("instance x lost its lease"), false},
		{fmt.Errorf("append: %w", sqlState("57P01")), true}, // admin_shutdown: a restart
		{sqlState("57P03"), true},                           // cannot_connect_now: starting up
		{sqlState("08006"), true},                           // connection failure
		{sqlState("55P03"), true},                           // lock_timeout
		{sqlState("25P03"), true},                           // idle_in_transaction_session_timeout
		{sqlState("40P01"), true},                           // deadlock
		{sqlState("23505"), false},                          // unique violation: not the database's health
		{sqlState("42P01"), false},                          // undefined table
		{sqliteCode(5), true},                               // SQLITE_BUSY
		{sqliteCode(5 | 2<<8), true},                        // SQLITE_BUSY_SNAPSHOT
		{sqliteCode(19), false},                             // SQLITE_CONSTRAINT
		{fmt.Errorf("begin: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{driver.ErrBadConn, true},
		{context.DeadlineExceeded, true},
		{&store.CommitUnknownError{Err: errors.New("conn closed")}, true},
	} {
		if got := store.Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestFenceErrors(t *testing.T) {
	t.Parallel()
	f := fmt.Errorf("append: %w", store.Fenced("turn %s moved", "r"))
	if !store.IsFenced(f) || store.IsAlreadyExecuted(f) || protocol.CodeOf(f) != protocol.Conflict {
		t.Fatalf("fenced error %v", f)
	}
	e := store.AlreadyExecuted("p")
	if !store.IsAlreadyExecuted(e) || store.IsFenced(e) {
		t.Fatalf("executed error %v", e)
	}
	if store.IsFenced(protocol.Errorf(protocol.Conflict, "plain conflict")) {
		t.Fatal("a plain conflict is not a fence")
	}
	if !store.IsCommitUnknown(fmt.Errorf("x: %w", &store.CommitUnknownError{Err: io.EOF})) {
		t.Fatal("a wrapped commit-unknown error")
	}
}
