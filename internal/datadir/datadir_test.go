package datadir_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/studio/operator/internal/datadir"
)

func TestLockKeepsASecondHolderOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := datadir.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetAddr("http://127.0.0.1:8765"); err != nil {
		t.Fatal(err)
	}
	// flock(2) locks belong to an open file, so a second open in this
	// process is refused as another process's would be.
	_, err = datadir.Acquire(dir)
	var held *datadir.HeldError
	if !errors.As(err, &held) || held.Holder.PID != os.Getpid() || held.Holder.Addr != "http://127.0.0.1:8765" {
		t.Fatalf("second Acquire: %v", err)
	}
	for _, want := range []string{"pid", "http://127.0.0.1:8765", dir, "--data-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
	l.Release()
	l2, err := datadir.Acquire(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
	if fi, err := os.Stat(filepath.Join(dir, datadir.LockFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", fi.Mode(), err)
	}
}

func TestCreateIsPrivateAndExposedSaysWhatIsNot(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "studio")
	if err := datadir.Create(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v", d, fi.Mode(), err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p := datadir.Exposed(dir); len(p) != 0 {
		t.Fatalf("a private data dir: %v", p)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "studio.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "studio.db"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := datadir.Exposed(dir)
	if len(p) != 2 || !strings.Contains(p[0], "0755") || !strings.Contains(p[0], "chmod 0700") ||
		!strings.Contains(p[1], "studio.db") || !strings.Contains(p[1], "chmod 0600") {
		t.Fatalf("problems: %q", p)
	}
}

// Deleting the lock file from under a holder must not let a second one in:
// the database file itself is locked too.
func TestDeletedLockFileStillKeepsTheDatabaseLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := datadir.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, datadir.LockFile)); err != nil {
		t.Fatal(err)
	}
	_, err = datadir.Acquire(dir)
	var held *datadir.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Acquire after the lock file was deleted: %v, want a HeldError", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, datadir.DatabaseFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("database file: %v %v", fi, err)
	}
	l.Release()
	l2, err := datadir.Acquire(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
}
