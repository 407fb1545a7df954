//go:build unix

package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
)

// rejoin starts this daemon afresh after it lost its lease: another daemon
// reaped it (it was paused, or cut off from the database, for longer than
// the lease expiry) and took its work over. Nothing of the old instance
// may write any more (its fence says reaped), so rather than stop for a
// supervisor, the process replaces itself (exec) with the same binary,
// arguments and environment, on the same address: a new instance with a
// new lease, serving again in a moment. Streams reconnect with their
// cursor, as after any restart.
func rejoin(log *slog.Logger, ln net.Listener, why error) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%w (and cannot rejoin: %v)", why, err)
	}
	addr := ln.Addr().String()
	log.Warn("lease lost: another daemon took this daemon's work over; rejoining as a new instance", "err", why, "addr", addr)
	ln.Close()
	return fmt.Errorf("rejoin: %w", syscall.Exec(exe, withAddr(os.Args, addr), os.Environ()))
}

// withAddr is args with --addr set to addr (the port the daemon bound,
// which --addr :0 did not name), once.
func withAddr(args []string, addr string) []string {
	out := make([]string, 0, len(args)+2)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--addr" && i+1 < len(args):
			i++
			continue
		case strings.HasPrefix(a, "--addr="):
			continue
		}
		out = append(out, a)
	}
	return append(out, "--addr", addr)
}
