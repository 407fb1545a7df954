package studio_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The sqlite backend is the Maintenance the daemon uses.
var _ studio.Maintenance = (*sqlite.Store)(nil)

// fx is one test's store, fake clock and service.
type fx struct {
	t     *testing.T
	ctx   context.Context
	path  string
	st    *sqlite.Store
	clock *storetest.Clock
	svc   *studio.Service
}

type fxOpts struct {
	provider model.Provider
	script   *script.Script
	noModel  bool
	cfg      func(*studio.Config)
}

func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background(), storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	return st
}

func newFx(t *testing.T, o fxOpts) *fx {
	t.Helper()
	path := filepath.Join(t.TempDir(), "studio.db")
	f := &fx{t: t, ctx: t.Context(), path: path, st: openStore(t, path), clock: storetest.NewClock(storetest.Epoch)}
	f.svc = f.service(f.st, o)
	return f
}

// service builds another Service over st with f's clock (a second
// scheduler, or the same daemon after a restart). It is stopped at cleanup.
func (f *fx) service(st *sqlite.Store, o fxOpts) *studio.Service {
	f.t.Helper()
	p := o.provider
	if p == nil && !o.noModel {
		s := script.Script{Turns: []script.Turn{{Steps: []script.Step{{Text: ptr("done")}}}}}
		if o.script != nil {
			s = *o.script
		}
		var err error
		if p, err = script.New(s); err != nil {
			f.t.Fatal(err)
		}
	}
	cfg := studio.Config{Store: st, Maintenance: st, Provider: p, Now: f.clock.Now, Workers: 2, ShutdownGrace: time.Millisecond}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	if cfg.Shared {
		// A daemon sharing its database registers its instance first: its
		// writes are fenced by it (store.Fence).
		now := f.clock.Now()
		if _, err := st.RegisterInstance(f.ctx, store.RegisterInstanceParams{Instance: store.Instance{ID: cfg.Instance,
			StartedAt: now, HeartbeatAt: now, LeaseExpiresAt: now.Add(time.Hour)}}); err != nil {
			f.t.Fatal(err)
		}
	}
	svc, err := studio.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	// reconcile_proposal settles through the coordinator, which owns the
	// proposal lifecycle; it needs nothing else of it.
	svc.SettleProposalsWith(coordinator.New(coordinator.Config{Store: st, Now: f.clock.Now}))
	f.t.Cleanup(func() { svc.Stop(context.Background()) })
	return svc
}

func (f *fx) start() {
	f.t.Helper()
	if err := f.svc.Start(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fx) exec(cmd studio.Command) studio.Result {
	f.t.Helper()
	res, err := f.svc.Execute(f.ctx, cmd, studio.ExecOptions{})
	if err != nil {
		f.t.Fatalf("%s: %v", studio.TypeOf(cmd), err)
	}
	return res
}

// waitCtx bounds a wait so that a hung test fails; it asserts nothing about time.
func (f *fx) waitCtx() context.Context {
	ctx, cancel := context.WithTimeout(f.ctx, testutil.Patience)
	f.t.Cleanup(cancel)
	return ctx
}

func (f *fx) waitRun(id string, cond func(studio.Run) bool) studio.Run {
	f.t.Helper()
	r, err := f.svc.WaitRun(f.waitCtx(), id, cond)
	if err != nil {
		f.t.Fatalf("waiting for run %s: %v (last seen %+v)", id, err, r)
	}
	return r
}

// rawDB opens the database file directly, for what the store API does not
// offer: a failing audit trigger, a proposal row.
func (f *fx) rawDB() *sql.DB {
	f.t.Helper()
	db, err := sql.Open("sqlite", "file:"+f.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { db.Close() })
	return db
}

// breakAudit makes every studio.app.command audit row fail to insert.
func (f *fx) breakAudit() {
	f.t.Helper()
	if _, err := f.rawDB().ExecContext(f.ctx, `CREATE TRIGGER test_audit_down BEFORE INSERT ON admin_events
		WHEN NEW.action = 'studio.app.command' BEGIN SELECT RAISE(ABORT, 'audit trail down'); END`); err != nil {
		f.t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func wantCode(t *testing.T, err error, code protocol.ErrorCode) *protocol.Error {
	t.Helper()
	if !protocol.IsCode(err, code) {
		t.Fatalf("err = %v, want %s", err, code)
	}
	return protocol.ErrorOf(err)
}

func detailInt(t *testing.T, pe *protocol.Error, key string) int64 {
	t.Helper()
	switch v := pe.Details[key].(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case float64:
		return int64(v)
	}
	t.Fatalf("details[%q] = %#v", key, pe.Details[key])
	return 0
}
