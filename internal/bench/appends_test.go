package bench

import (
	"context"
	"strings"
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

// TestSumSeries: a metric's series are summed whatever their labels, and
// metrics whose names extend it are not counted.
func TestSumSeries(t *testing.T) {
	t.Parallel()
	text := `# HELP studio_operator_turns_total Turns ended.
# TYPE studio_operator_turns_total counter
studio_operator_turns_total{code="",outcome="completed"} 3
studio_operator_turns_total{code="model_failure",outcome="failed"} 1100
studio_operator_turns_total_extra 7
studio_operator_turns 2
`
	got, err := sumSeries(strings.NewReader(text), "studio_operator_turns_total")
	if err != nil || got != 1103 {
		t.Fatalf("sumSeries = %v, %v; want 1103", got, err)
	}
	if got, err := sumSeries(strings.NewReader(text), "studio_operator_turns"); err != nil || got != 2 {
		t.Fatalf("sumSeries(studio_operator_turns) = %v, %v; want 2", got, err)
	}
	if got, err := sumSeries(strings.NewReader(text), "studio_absent_total"); err != nil || got != 0 {
		t.Fatalf("sumSeries(absent) = %v, %v; want 0", got, err)
	}
}
