//go:build !unix

package main

import "log/slog"

// pauseAt: process tests pause daemons only on Unix (pause_unix.go).
func pauseAt(*slog.Logger) func(point string) { return nil }
