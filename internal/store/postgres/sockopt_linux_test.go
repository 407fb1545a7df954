package postgres

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sys/unix"
)

// TestConnectionsNoticeADeadPeer: every connection of the pool is dialed
// with TCP keepalives and TCP_USER_TIMEOUT from Options.TCPTimeout, so a
// connection whose server stopped answering (a half-open connection) fails
// in seconds, not after the kernel's fifteen minutes; and its session
// names the daemon's process in pg_stat_activity.
func TestConnectionsNoticeADeadPeer(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	s, err := OpenWith(t.Context(), url, Options{TCPTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := s.db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var userTimeout, keepAlive, idle, interval int
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn).Conn().PgConn().Conn().(syscall.Conn)
		if !ok {
			return errors.New("the connection is not a socket")
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			get := func(level, opt int, v *int) {
				if serr == nil {
					*v, serr = unix.GetsockoptInt(int(fd), level, opt)
				}
			}
			get(unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, &userTimeout)
			get(unix.SOL_SOCKET, unix.SO_KEEPALIVE, &keepAlive)
			get(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, &idle)
			get(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, &interval)
		}); err != nil {
			return err
		}
		return serr
	})
	if err != nil {
		t.Fatal(err)
	}
	if userTimeout != 4000 || keepAlive == 0 || idle != 2 || interval != 1 {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d, idle %d s, interval %d s; want 4000 ms, on, 2 s, 1 s", userTimeout, keepAlive, idle, interval)
	}
	var name string
	if err := conn.QueryRowContext(context.Background(), `SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != ApplicationName(os.Getpid()) {
		t.Fatalf("application_name %q, want %q", name, ApplicationName(os.Getpid()))
	}
}
