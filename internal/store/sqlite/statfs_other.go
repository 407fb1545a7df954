//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package sqlite

import "errors"

func freeSpace(string) (int64, error) {
	return 0, errors.New("free space is not available on this platform")
}
