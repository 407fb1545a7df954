package bench

import (
	"context"
	"testing"
	"time"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/postgres/pgtest"
)

// TestAppendRunsLeaveNoWorkOnPostgres: with --database the append runs
// write to the database the bench daemon then serves, so they must end
// the turns they submitted. Left queued, the daemon claims and runs a
// thousand of them while the idle streams are measured, and their work
// reads as memory per idle stream.
func TestAppendRunsLeaveNoWorkOnPostgres(t *testing.T) {
	t.Parallel()
	srv := pgtest.New(t)
	url := srv.NewDatabase(t, "")
	ctx := t.Context()
	if _, err := appendRate(ctx, url, 3, 0, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := appendRate(ctx, url, 2, BigFrame, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := pipelinedRate(ctx, url, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	st, err := openBenchStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	left, err := st.RecoverTurns(context.Background(), store.RecoverTurnsParams{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the append runs left %d turns queued or running in the daemon's database, want none", len(left))
	}
}
