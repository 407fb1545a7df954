package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// TestMaintenance: the upkeep the application's run_maintenance and doctor
// use, on a real file.
func TestMaintenance(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	ctx := t.Context()
	if _, err := s.CreatePlaybook(ctx, store.CreatePlaybookParams{ID: "p", Project: "x", Name: "p", Prompt: "p", Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	name, db, wal, err := s.DatabaseFiles()
	if err != nil || name != "studio.db" || db <= 0 || wal < 0 {
		t.Fatalf("DatabaseFiles = %q, %d, %d, %v", name, db, wal, err)
	}
	if filepath.IsAbs(name) {
		t.Fatalf("DatabaseFiles names a host path: %s", name)
	}
	for _, quick := range []bool{true, false} {
		if problems, err := s.IntegrityCheck(ctx, quick); err != nil || len(problems) != 0 {
			t.Fatalf("IntegrityCheck(quick=%v) = %v, %v", quick, problems, err)
		}
	}
	if _, err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Vacuum(ctx); err != nil {
		t.Fatal(err)
	}
	if free, err := s.FreeSpace(); err != nil || free <= 0 {
		t.Fatalf("FreeSpace = %d, %v", free, err)
	}
	if _, err := s.GetPlaybook(ctx, "p"); err != nil {
		t.Fatalf("after vacuum: %v", err)
	}
}
