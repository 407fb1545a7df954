// Package pgtest runs a throwaway PostgreSQL server for tests: it finds
// the server binaries ($STUDIO_POSTGRES_BIN, /usr/lib/postgresql/*/bin,
// else initdb on PATH), initdb's a cluster in a temporary directory,
// starts it on a free loopback port and removes it all at Stop. Tests
// create a database each (NewDatabase), so they run in parallel.
//
// A test that injects database faults starts a server of its own (New)
// and shuts it down and starts it again on the same port and data
// directory (Shutdown, StartAgain, Restart), as an operator's
// `pg_ctl restart -m fast` or a managed database's failover does.
// Servers keep commit timestamps (track_commit_timestamp), so a test can
// tell in which order two rows' transactions committed.
//
// Without the binaries tests skip, unless STUDIO_REQUIRE_POSTGRES=1 (CI),
// which makes their absence a failure (Main).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres says the server binaries are missing.
var ErrNoPostgres = errors.New("no PostgreSQL server binaries")

// Server is a throwaway cluster owned by the test binary.
type Server struct {
	dir  string // removed by Stop
	port int
	bin  string // the server binaries' directory
	cred *syscall.Credential
	next atomic.Int64

	mu     sync.Mutex // guards the rest
	cmd    *exec.Cmd  // nil while shut down
	exited chan struct{}
	admin  *pgx.Conn // to the postgres database: CREATE/DROP DATABASE
}

// Main runs a package's tests with a server started before them (setup
// runs once it is up) and stopped after; srv is nil when the tests must
// skip (skip says why). It returns the exit code for os.Exit.
func Main(m *testing.M, setup func(srv *Server) error, started func(srv *Server, skip string)) int {
	srv, err := Start()
	if err == nil && setup != nil {
		if err = setup(srv); err != nil {
			srv.Stop()
		}
	}
	if err != nil {
		if errors.Is(err, ErrNoPostgres) && os.Getenv("STUDIO_REQUIRE_POSTGRES") != "1" {
			started(nil, err.Error()+" (set STUDIO_REQUIRE_POSTGRES=1 to make this a failure)")
			return m.Run()
		}
		fmt.Fprintf(os.Stderr, "postgres tests: %v\n", err)
		return 1
	}
	started(srv, "")
	code := m.Run()
	srv.Stop()
	return code
}

// binDir is $STUDIO_POSTGRES_BIN when set, else the newest
// /usr/lib/postgresql/N/bin with initdb, else the directory of initdb on PATH.
func binDir() (string, error) {
	if dir := os.Getenv("STUDIO_POSTGRES_BIN"); dir != "" {
		for _, name := range []string{"initdb", "postgres"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return "", fmt.Errorf("%w: STUDIO_POSTGRES_BIN=%s has no %s", ErrNoPostgres, dir, name)
			}
		}
		return dir, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool { return pgMajor(matches[i]) > pgMajor(matches[j]) })
	for _, m := range matches {
		dir := filepath.Dir(m)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w (initdb, postgres) in /usr/lib/postgresql/*/bin or on PATH", ErrNoPostgres)
}

func pgMajor(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// serverUser is who runs initdb and postgres: the current user, or when
// that is root (which both refuse) the postgres user, else nobody.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and neither a postgres nor a nobody user exists to run the server as")
}

// Start initdb's and starts a server.
func Start() (_ *Server, err error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempBase(cred), "studio-pg-")
	if err != nil {
		return nil, err
	}
	srv := &Server{dir: dir, bin: bin, cred: cred, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			srv.Stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for range 3 { // a port found free may be taken before the server binds it
		if srv.port, err = freePort(); err != nil {
			return nil, err
		}
		if err = srv.start(); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	return srv, nil
}

// tempBase is where the cluster's directory goes: the temporary directory,
// unless the server's user could not reach it or the socket path would be
// too long (about 100 bytes), then /tmp.
func tempBase(cred *syscall.Credential) string {
	base := os.TempDir()
	if len(base) > 60 {
		return "/tmp"
	}
	if cred == nil {
		return base
	}
	for d := base; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return base
		}
	}
}

// FreePort is a loopback port nothing listens on (at the time of asking).
func FreePort() (int, error) { return freePort() }

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs postgres in the foreground as a child and waits until it
// accepts connections. The caller holds srv.mu or owns srv alone.
func (srv *Server) start() error {
	// Appended to: a restarted server's log follows the previous run's.
	logf, err := os.OpenFile(filepath.Join(srv.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	if srv.cred != nil {
		_ = logf.Chown(int(srv.cred.Uid), int(srv.cred.Gid))
	}
	cmd := exec.Command(filepath.Join(srv.bin, "postgres"), "-D", filepath.Join(srv.dir, "data"), "-p", strconv.Itoa(srv.port), "-k", srv.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
		// Fault tests compare when rows' transactions committed.
		"-c", "track_commit_timestamp=on",
		// A test cluster: durability is not under test.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and killed with the test binary if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: srv.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, srv.URL("postgres"))
		cancel()
		if err == nil {
			srv.cmd, srv.exited, srv.admin = cmd, exited, conn
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(srv.dir, "server.log"))
			return fmt.Errorf("postgres exited: %s", log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			<-exited
			return fmt.Errorf("postgres did not accept connections within 30s: %w", err)
		}
	}
}

// URL is the URL of database db on the server.
func (srv *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", srv.port, db)
}

// Stop shuts the server down (fast shutdown) and removes its directory.
func (srv *Server) Stop() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.shutdown()
	_ = os.RemoveAll(srv.dir)
}

// New starts a server of tb's own, stopped and removed when tb ends: for a
// test that restarts or stops its database, which a shared server's other
// tests must not see. Without the server binaries tb skips, unless
// STUDIO_REQUIRE_POSTGRES=1.
func New(tb testing.TB) *Server {
	tb.Helper()
	srv, err := Start()
	if errors.Is(err, ErrNoPostgres) && os.Getenv("STUDIO_REQUIRE_POSTGRES") != "1" {
		tb.Skip(err.Error() + " (set STUDIO_REQUIRE_POSTGRES=1 to make this a failure)")
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Stop)
	return srv
}

// Shutdown stops the server with a fast shutdown (SIGINT: open sessions
// are ended, transactions rolled back), keeping its data directory and
// port for StartAgain. Clients see their connections closed and new ones
// refused until then. Shutting down a server that is down does nothing.
func (srv *Server) Shutdown() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.shutdown()
}

func (srv *Server) shutdown() {
	if srv.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.admin.Close(ctx)
		cancel()
		srv.admin = nil
	}
	if srv.cmd == nil {
		return
	}
	_ = srv.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-srv.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL)
		<-srv.exited
	}
	srv.cmd = nil
}

// StartAgain starts a server that Shutdown stopped, on the same port and
// data directory, and waits until it accepts connections. Starting a
// server that runs does nothing.
func (srv *Server) StartAgain() error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.cmd != nil {
		return nil
	}
	return srv.start()
}

// Restart is a fast shutdown and a start on the same port and data
// directory: what `pg_ctl restart -m fast` does (SIGINT to the postmaster,
// wait for it to exit, start it with the same options), with the server
// staying the test binary's child.
func (srv *Server) Restart() error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.shutdown()
	return srv.start()
}

// Running says whether the server runs (it was not shut down).
func (srv *Server) Running() bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.cmd != nil
}

// NewDatabase creates a database for tb, a copy of template when it is
// not "" (else empty), dropped when tb ends, and returns its URL.
func (srv *Server) NewDatabase(tb testing.TB, template string) string {
	tb.Helper()
	name := fmt.Sprintf("t_%d_%s", srv.next.Add(1), strings.ToLower(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, tb.Name())))
	if len(name) > 63 {
		name = name[:63]
	}
	create := `CREATE DATABASE ` + pgx.Identifier{name}.Sanitize()
	if template != "" {
		create += ` TEMPLATE ` + pgx.Identifier{template}.Sanitize()
	}
	srv.Exec(tb, create)
	tb.Cleanup(func() { srv.Exec(tb, `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`) })
	return srv.URL(name)
}

// Exec runs an administrative statement on the server.
func (srv *Server) Exec(tb testing.TB, sql string) {
	tb.Helper()
	if err := srv.ExecContext(context.Background(), sql); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// ExecContext runs an administrative statement on the server.
func (srv *Server) ExecContext(ctx context.Context, sql string) error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.admin == nil {
		return errors.New("the server is shut down")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := srv.admin.Exec(ctx, sql)
	return err
}
