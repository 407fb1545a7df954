// Package pgtest runs a throwaway PostgreSQL server for tests: it finds
// the server binaries ($STUDIO_POSTGRES_BIN, /usr/lib/postgresql/*/bin,
// else initdb on PATH), initdb's a cluster in a temporary directory,
// starts it on a free loopback port and removes it all at Stop. Tests
// create a database each (NewDatabase), so they run in parallel.
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
	dir    string // removed by Stop
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	admin  *pgx.Conn // to the postgres database: CREATE/DROP DATABASE
	mu     sync.Mutex
	next   atomic.Int64
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
	srv := &Server{dir: dir, exited: make(chan struct{})}
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
		if err = srv.start(bin, data, cred); err == nil {
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
// accepts connections.
func (srv *Server) start(bin, data string, cred *syscall.Credential) error {
	logf, err := os.Create(filepath.Join(srv.dir, "server.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	if cred != nil {
		_ = logf.Chown(int(cred.Uid), int(cred.Gid))
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(srv.port), "-k", srv.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
		// A test cluster: durability is not under test.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and killed with the test binary if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
	if srv.admin != nil {
		srv.admin.Close(context.Background())
	}
	if srv.cmd != nil {
		_ = srv.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-srv.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL)
			<-srv.exited
		}
	}
	_ = os.RemoveAll(srv.dir)
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
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := srv.admin.Exec(ctx, sql)
	return err
}
