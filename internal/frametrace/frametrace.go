//go:build !frametrace

// Package frametrace stamps a frame's stages across processes on one
// clock (the wall clock): the sending daemon's batch and commit, the
// receiving daemon's notification and stream flush, the bench client's
// receipt. It is a measuring tool, compiled in only with the build tag
// frametrace (go build -tags frametrace ./cmd/studio) and then switched
// on by FRAMETRACE_DIR, a directory each process writes a file into.
// In the product's build On is false and Stamp does nothing, so call
// sites guarded by On are compiled out. checks/frametrace reads the
// files (docs/benchmarks.md names the stages).
package frametrace

import "time"

// On reports whether stamps are recorded: never without the build tag.
const On = false

// Stamp records that the frames from..to of a conversation reached stage.
func Stamp(stage, conversationID string, from, to int64) {}

// StampAt is Stamp at a time the caller took.
func StampAt(at time.Time, stage, conversationID string, from, to int64) {}
