//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// userTimeout is Linux's TCP_USER_TIMEOUT; elsewhere the keepalives alone
// find a half-open connection.
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error { return nil }
