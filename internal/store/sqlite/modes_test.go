//go:build unix

package sqlite

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The database, its write-ahead log and its shared-memory
// file are created readable by their owner only, whatever the umask.
func TestNewDatabaseFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o002) // the most permissive umask in common use; not parallel: the umask is the process's
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "studio.db")
	openAt(t, path) // migrating writes, so the WAL and its index exist
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", filepath.Base(p), mode)
		}
	}
}
