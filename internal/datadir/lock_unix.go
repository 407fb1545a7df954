//go:build unix

package datadir

import (
	"errors"
	"os"
	"syscall"
)

var errLocked = errors.New("locked by another process")

// tryLock takes an exclusive flock(2) without waiting.
func tryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

func unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
