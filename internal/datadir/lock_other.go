//go:build !unix

package datadir

import (
	"errors"
	"os"
)

var errLocked = errors.New("locked by another process")

// Without flock(2) the lock file is written but not enforced.
func tryLock(*os.File) error { return nil }

func unlock(*os.File) error { return nil }
