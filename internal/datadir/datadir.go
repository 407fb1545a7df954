// Package datadir owns the daemon's data directory on disk: its creation
// with private modes, the lock file that keeps a second daemon off the same
// SQLite database, and the check that warns when other users can read what
// is in it (the database, its WAL, the token).
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LockFile is the lock's name in the data directory.
const LockFile = "studio.lock"

// DatabaseFile is the SQLite database's name in the data directory. Acquire
// locks it too: the lock file can be deleted from under a running daemon
// (a new one then locks a new file), the open database cannot be replaced
// without the daemon noticing, so the lock on it is what keeps a second
// daemon off the same database.
const DatabaseFile = "studio.db"

// Create makes the data directory, and any missing parent, readable by its
// owner only. An existing directory keeps its mode: Exposed reports it.
func Create(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	return nil
}

// Holder is what a lock file says about the daemon that holds it.
type Holder struct {
	PID  int    `json:"pid"`
	Addr string `json:"addr,omitempty"` // the URL it serves, once it listens
}

// HeldError is returned by Acquire when another process holds the lock.
type HeldError struct {
	Dir    string
	Holder Holder // zero when the holder has not written it yet
}

func (e *HeldError) Error() string {
	who := "another studio daemon"
	switch {
	case e.Holder.PID > 0 && e.Holder.Addr != "":
		who += fmt.Sprintf(" (pid %d, serving %s)", e.Holder.PID, e.Holder.Addr)
	case e.Holder.PID > 0:
		who += fmt.Sprintf(" (pid %d, starting)", e.Holder.PID)
	}
	return fmt.Sprintf("%s holds the data directory %s: stop it, or give this one another --data-dir", who, e.Dir)
}

// Lock is an exclusive lock on a data directory, held until Release or the
// end of the process (the operating system drops it with the file).
type Lock struct {
	f      *os.File
	db     *os.File // the database file, flocked (an flock never meets SQLite's own fcntl locks)
	holder Holder
}

// Acquire takes the data directory's lock without waiting and writes this
// process's pid into it, and locks the database file (DatabaseFile,
// created empty when missing: SQLite takes an empty file as a new
// database). A lock held by another process, on either file, is a
// *HeldError naming it.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := tryLock(f); err != nil {
		defer f.Close()
		if errors.Is(err, errLocked) {
			held := &HeldError{Dir: dir}
			if b, rerr := os.ReadFile(path); rerr == nil {
				_ = json.Unmarshal(b, &held.Holder)
			}
			return nil, held
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	db, err := lockDatabase(dir)
	if err != nil {
		_ = unlock(f)
		f.Close()
		return nil, err
	}
	l := &Lock{f: f, db: db, holder: Holder{PID: os.Getpid()}}
	if err := l.write(); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// lockDatabase takes the flock on the database file. The holder, when the
// lock file was deleted and recreated, is unknown: the message says so.
func lockDatabase(dir string) (*os.File, error) {
	path := filepath.Join(dir, DatabaseFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open database file: %w", err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, &HeldError{Dir: dir}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// SetAddr records the URL the holder serves, for the message a second
// daemon shows. On a nil Lock (no lock taken) it does nothing.
func (l *Lock) SetAddr(addr string) error {
	if l == nil {
		return nil
	}
	l.holder.Addr = addr
	return l.write()
}

func (l *Lock) write() error {
	b, _ := json.Marshal(l.holder)
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	if _, err := l.f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	return nil
}

// Release drops the lock. The file stays: removing it would let a third
// process lock a new file while a second still holds the old one open. On a
// nil Lock it does nothing.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	// The database file's descriptor closes last, after the store closed:
	// closing any descriptor of a file drops the process's fcntl locks on
	// it, SQLite's included.
	_ = unlock(l.f)
	_ = l.f.Close()
	if l.db != nil {
		_ = unlock(l.db)
		_ = l.db.Close()
	}
}

// Exposed lists what in the data directory other users can read or write —
// the directory, the SQLite database and its -wal and -shm, the token, the
// lock — as problems saying how to fix them. Missing files are skipped.
func Exposed(dir string) []string {
	var problems []string
	check := func(path, what string, want fs.FileMode) {
		fi, err := os.Stat(path)
		if err != nil {
			return
		}
		if mode := fi.Mode().Perm(); mode&0o077 != 0 {
			problems = append(problems, fmt.Sprintf("%s %s is open to other users (mode %04o): chmod %04o %s",
				what, path, mode, want, path))
		}
	}
	check(dir, "the data directory", 0o700)
	for _, name := range []string{"studio.db", "studio.db-wal", "studio.db-shm", "token", LockFile} {
		check(filepath.Join(dir, name), "the file", 0o600)
	}
	return problems
}
