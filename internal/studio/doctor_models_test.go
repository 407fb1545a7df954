package studio_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// checkedModel is a provider whose Check answers err.
type checkedModel struct{ err error }

func (checkedModel) Name() string { return "checked" }
func (checkedModel) Stream(context.Context, model.Request) iter.Seq2[model.Event, error] {
	return func(func(model.Event, error) bool) {}
}
func (c checkedModel) Check(context.Context) error { return c.err }

// TestDoctorChecksEveryModel: a model conversations may choose besides
// the default that does not answer is a problem of the report, named.
func TestDoctorChecksEveryModel(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{cfg: func(c *studio.Config) {
		c.OtherModels = []studio.NamedModel{
			{Name: "local", Provider: checkedModel{}},
			{Name: "gateway", Provider: checkedModel{errors.New("openai: http://127.0.0.1:9/v1 is unreachable: connection refused")}},
		}
	}})
	rep, err := f.svc.Doctor(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != studio.StatusDegraded || len(rep.Problems) != 1 ||
		!strings.Contains(rep.Problems[0], "the model gateway is not answering") || !strings.Contains(rep.Problems[0], "connection refused") {
		t.Fatalf("doctor = %s %q, want the gateway model named", rep.Status, rep.Problems)
	}
}

// TestDoctorExpiredInstanceOnSQLite: an instance whose lease ran out (the
// source daemon of a restored copy, or a process that ended without
// stopping) is listed, but is a problem only where other daemons share
// the database and one should take its work over.
func TestDoctorExpiredInstanceOnSQLite(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{})
	then := f.clock.Now().Add(-time.Hour)
	if _, err := f.st.RegisterInstance(f.ctx, store.RegisterInstanceParams{Instance: store.Instance{ID: "source-daemon",
		Address: "http://127.0.0.1:8765", PID: 42, Version: "v1", StartedAt: then, HeartbeatAt: then, LeaseExpiresAt: then.Add(10 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	rep, err := f.svc.Doctor(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != studio.StatusOK || len(rep.Problems) != 0 || rep.Cluster.Expired != 1 {
		t.Fatalf("doctor on a restored SQLite copy = %s %q (expired %d), want ok with the instance listed", rep.Status, rep.Problems, rep.Cluster.Expired)
	}
	shared := f.service(f.st, fxOpts{cfg: func(c *studio.Config) { c.Shared, c.Instance = true, "this-daemon" }})
	rep, err = shared.Doctor(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != studio.StatusDegraded || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "lost their lease") {
		t.Fatalf("doctor on a shared database = %s %q, want the expired lease as a problem", rep.Status, rep.Problems)
	}
}
