// Package coordtest builds what a coordinator runs on in tests: a migrated
// SQLite file, a fake clock, a model provider (a script by default) and the
// seeded application services, with a coordinator configuration tuned for
// tests. The coordinator's own tests and the HTTP adapter's build on it.
package coordtest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/tools"
)

// Stack is a real StateDB, clock, provider and application.
type Stack struct {
	DB       *sqlite.Store
	Clock    *storetest.Clock
	Provider model.Provider
	App      *studio.Service
}

// Options choose the provider and where the database lives.
type Options struct {
	// Provider is the model; nil plays Script (default script.Greeting).
	Provider model.Provider
	Script   *script.Script
	// InMemory puts the database in /dev/shm where there is one: the store
	// syncs every commit, and some tests commit a lot.
	InMemory bool
}

// New builds a stack for t; t's cleanup stops the application and closes
// the database (after the cleanups registered later, such as a
// coordinator's shutdown).
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	dir := t.TempDir()
	if o.InMemory {
		if d, err := os.MkdirTemp("/dev/shm", "studio-test-"); err == nil {
			dir = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	db, err := sqlite.Open(filepath.Join(dir, "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{DB: db, Clock: storetest.NewClock(storetest.Epoch), Provider: o.Provider}
	if _, err := db.Migrate(context.Background(), s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if s.Provider == nil {
		sc := script.Greeting
		if o.Script != nil {
			sc = *o.Script
		}
		if s.Provider, err = script.New(sc); err != nil {
			t.Fatal(err)
		}
	}
	if s.App, err = studio.New(studio.Config{Store: db, Maintenance: db, Now: s.Clock.Now, Provider: s.Provider, Logger: Logger()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.App.Stop(context.Background())
		db.Close()
	})
	return s
}

// Config is a coordinator configuration on st (the stack's database, maybe
// wrapped) for tests: every text delta a frame, quick retries, a short
// shutdown grace, the default tools.
func (s *Stack) Config(st store.Store) coordinator.Config {
	return coordinator.Config{Store: st, Provider: s.Provider, Commands: s.App, Now: s.Clock.Now, ShutdownGrace: time.Millisecond,
		TextFlush: time.Millisecond, Tools: tools.Default(s.App, spaces.Default, s.Clock.Now), Logger: Logger(),
		RetryBackoff: time.Millisecond, MaxRetryWait: 50 * time.Millisecond}
}

// Conversations is the conversation service on st (the stack's database,
// maybe wrapped) beside engine, on the stack's clock, as the daemon wires it.
func (s *Stack) Conversations(st store.Store, engine conversations.Engine) *conversations.Service {
	return conversations.New(conversations.Config{Store: st, Engine: engine, Now: s.Clock.Now})
}

// Logger drops the logs of expected failures; STUDIO_TEST_LOGS=1 shows them.
func Logger() *slog.Logger {
	if os.Getenv("STUDIO_TEST_LOGS") != "" {
		return slog.Default()
	}
	return slog.New(slog.DiscardHandler)
}

// CountDone counts the request's done frames: exactly one, once it ended.
func CountDone(frames []protocol.Frame, requestID string) int {
	n := 0
	for _, f := range frames {
		if f.RequestID == requestID && f.Type == protocol.FrameDone {
			n++
		}
	}
	return n
}
