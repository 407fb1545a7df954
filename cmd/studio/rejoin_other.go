//go:build !unix

package main

import (
	"log/slog"
	"net"
)

// rejoin cannot replace the process here: the daemon exits, for its
// supervisor to restart it.
func rejoin(_ *slog.Logger, _ net.Listener, why error) error { return why }
