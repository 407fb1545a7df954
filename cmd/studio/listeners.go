package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"slices"

	"github.com/studio/operator/internal/datadir"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/metrics"
)

// listen opens the daemon's listener, capped per client, and records its
// address in the data directory's lock for a second daemon's message.
func listen(cfg *config, ho httpOptions, lock *datadir.Lock) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, err
	}
	if err := lock.SetAddr("http://" + ln.Addr().String()); err != nil {
		ln.Close()
		return nil, err
	}
	return httpapi.LimitConns(ln, ho.maxClientConns, ho.maxConns), nil
}

// allowedHosts are the Host names the daemon answers besides loopback and
// IP addresses: the --addr host when it is a name, and --allowed-hosts.
func allowedHosts(addr string, extra []string) []string {
	hosts := slices.Clone(extra)
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		hosts = append(hosts, host)
	}
	return hosts
}

// serveUnavailable serves h until ctx ends: the daemon without StateDB.
func serveUnavailable(ctx context.Context, cfg *config, log *slog.Logger, ho httpOptions, lock *datadir.Lock, h http.Handler) error {
	ln, err := listen(cfg, ho, lock)
	if err != nil {
		return err
	}
	srv := httpapi.NewHTTPServer(h, log)
	log.Warn("studio serving without StateDB", "addr", "http://"+ln.Addr().String())
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// serveMetrics serves GET /metrics on its own listener, without auth: for a
// scraper on a network the operator chooses (a loopback or cluster-internal
// address); the main listener keeps requiring the token. It has the main
// listener's edge (httpapi.Guard: Host allow-list, timeouts, security
// headers, typed errors) and caps of its own, small, so that a flood of it
// cannot take the descriptors the main listener and the database need.
func serveMetrics(addr string, reg *metrics.Registry, profiles bool, edge httpapi.EdgeConfig, errc chan<- error) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	if profiles {
		// Go's profiles, for finding where a daemon spends its time under
		// load (go tool pprof http://ADDR/debug/pprof/profile).
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	srv := httpapi.NewMetricsServer(httpapi.Guard(mux, edge), edge.Logger)
	limited := httpapi.LimitConns(ln, httpapi.MetricsMaxClientConns, httpapi.MetricsMaxConns)
	go func() {
		if err := srv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("metrics listener: %w", err)
		}
	}()
	return srv, ln.Addr().String(), nil
}

// printSignInURL prints the cockpit's sign-in URL on stdout, the token in the
// URL fragment: http://127.0.0.1:8765/#token=... A fragment is never sent to
// the server, so the token reaches no request line, proxy or access log; the
// page moves it to sessionStorage and removes it from the address bar.
// This deliberately supersedes "never print the token" for this one line on
// the operator's own terminal. When stdout is not a terminal (withToken
// false) it is kept by a journal or a container log, so the line names the
// address and `studio token` instead. It never goes to the slog logs on
// stderr, and never into a URL query.
func printSignInURL(w io.Writer, addr net.Addr, token, dataDir string, withToken bool) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	base := "http://" + net.JoinHostPort(host, port)
	if !withToken {
		fmt.Fprintf(w, "Studio cockpit: %s/ (sign in with the token that `studio token --data-dir %s` prints)\n", base, dataDir)
		return
	}
	fmt.Fprintf(w, "Studio cockpit: %s/#token=%s\n", base, url.QueryEscape(token))
}
