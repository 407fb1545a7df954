// Package sqlitetest opens the real SQLite store tests run on: a fresh,
// migrated database file in the test's temporary directory, closed when
// the test ends.
package sqlitetest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/studio/operator/internal/store/sqlite"
)

// Open is a fresh store at t.TempDir()/studio.db, migrated as of now.
func Open(t testing.TB, now time.Time) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	return s
}
