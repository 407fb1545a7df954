//go:build !linux

package httpapi

import (
	"errors"
	"net"
)

// closeWatch is Linux's one poller for every stream's connection; here
// each stream has a goroutine reading its connection (watchStreamConn).
type closeWatch struct{}

func newCloseWatch() (*closeWatch, error) {
	return nil, errors.New("no poller on this system")
}

func (*closeWatch) watch(net.Conn, func()) (int32, bool) { return 0, false }
func (*closeWatch) unwatch(int32, net.Conn)              {}
func (*closeWatch) close()                               {}
