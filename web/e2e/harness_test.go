package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/studio/operator/internal/apiclient"
)

// The browser suite starts the real `studio` binary and drives headless
// Chromium with chromedp. Without Chromium it skips, saying so; with
// STUDIO_REQUIRE_BROWSER=1 (CI) a missing browser fails instead.

const (
	// waitTimeout is only a safety net: every wait polls for a condition.
	waitTimeout = 45 * time.Second
	pollEvery   = 40 * time.Millisecond
)

func chromiumPath() string {
	if p := os.Getenv("STUDIO_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return ""
		}
		return p
	}
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// requireBrowser skips (or, under STUDIO_REQUIRE_BROWSER=1, fails) when
// there is no Chromium to drive.
func requireBrowser(t *testing.T) {
	t.Helper()
	if chromiumPath() != "" {
		return
	}
	msg := "Chromium is not installed (looked for /usr/bin/chromium; set STUDIO_CHROMIUM to another path): the browser end-to-end tests did not run. Install it with `apt-get install -y chromium`."
	if os.Getenv("STUDIO_REQUIRE_BROWSER") == "1" {
		t.Fatal("STUDIO_REQUIRE_BROWSER=1: " + msg)
	}
	t.Skip("SKIP: " + msg)
}

// --- the binary -------------------------------------------------------------

var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "studio-e2e-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "studio")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/studio/operator/cmd/studio").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

type daemon struct {
	URL    string
	Token  string
	client *apiclient.Client
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr strings.Builder
	stdout strings.Builder
	exited chan struct{}
}

var addrRE = regexp.MustCompile(`addr=(http://127\.0\.0\.1:\d+)`)

// startDaemon runs `studio serve` on a free loopback port with a script model.
func startDaemon(t *testing.T, script string, extra ...string) *daemon {
	t.Helper()
	return startDaemonAt(t, t.TempDir(), "127.0.0.1:0", script, extra...)
}

// startDaemonAt runs `studio serve` on a data directory and address.
func startDaemonAt(t *testing.T, dataDir, addr, script string, extra ...string) *daemon {
	t.Helper()
	requireBrowser(t) // every test here needs the browser: skip before building anything
	return launchDaemon(t, dataDir, addr, script, extra...)
}

// launchDaemon is startDaemonAt for a test that checks for its browser
// itself (Firefox's).
func launchDaemon(t *testing.T, dataDir, addr, script string, extra ...string) *daemon {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	scriptPath := filepath.Join(dataDir, "script.json")
	if err := os.WriteFile(scriptPath, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	// The tests read the sign-in URL with its token from stdout, a pipe.
	args := append([]string{"serve", "--addr", addr, "--data-dir", dataDir, "--model", "script:" + scriptPath, "--print-token-url"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "STUDIO_TOKEN=")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, exited: make(chan struct{})}
	addrc := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			d.mu.Lock()
			d.stderr.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		defer readers.Done()
		b := make([]byte, 4096)
		for {
			n, err := outPipe.Read(b)
			d.mu.Lock()
			d.stdout.Write(b[:n])
			d.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { readers.Wait(); _ = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.logs())
		}
	})
	select {
	case d.URL = <-addrc:
	case <-d.exited:
		t.Fatalf("daemon exited at start:\n%s", d.logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("daemon did not start:\n%s", d.logs())
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	d.Token = strings.TrimSpace(string(tok))
	d.client = apiclient.New(d.URL, d.Token, nil)
	return d
}

// stop ends the daemon with SIGTERM (SIGKILL after 15 s) and waits for it.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

func (d *daemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

func (d *daemon) out() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stdout.String()
}

// --- the browser ------------------------------------------------------------

var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
	stopBrowser = func() {}
)

// browser starts one headless Chromium for the whole package; each test
// gets its own browser context (separate storage, like a fresh profile).
func browser(t *testing.T) context.Context {
	t.Helper()
	requireBrowser(t)
	browserOnce.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromiumPath()),
			chromedp.NoSandbox,
			chromedp.Flag("disable-gpu", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.WindowSize(1440, 960),
		)
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		stopBrowser = func() { cancelBrowser(); cancelAlloc() }
		browserErr = chromedp.Do(bctx) // starts the browser, with no timeout
		browserCtx = bctx
	})
	if browserErr != nil {
		msg := fmt.Sprintf("Chromium at %s did not start: %v", chromiumPath(), browserErr)
		if os.Getenv("STUDIO_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIP: " + msg)
	}
	return browserCtx
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopBrowser()
	if bin, err := buildBinary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// page is one browser tab on a daemon's cockpit.
type page struct {
	t   *testing.T
	ctx context.Context
	d   *daemon

	mu         sync.Mutex
	exceptions []string
}

// openPage opens a new tab in a fresh browser context and signs in with the
// URL `studio serve` prints (token in the fragment).
func openPage(t *testing.T, d *daemon, path string) *page {
	t.Helper()
	return openPageAs(t, d, path, d.Token)
}

// openPageAs is openPage signed in with another token (a principal's).
func openPageAs(t *testing.T, d *daemon, path, token string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	p := &page{t: t, ctx: ctx, d: d}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || (m.Type == "error" && !strings.Contains(m.Text, "Failed to load resource")) {
				p.mu.Lock()
				p.exceptions = append(p.exceptions, m.String())
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.exceptions {
			t.Errorf("browser console error: %s", e)
		}
	})
	p.do(chromedp.Navigate(d.URL + path + "#token=" + token))
	p.waitJS(`document.querySelector('.rail .rail-link') !== null`, "the cockpit rail")
	return p
}

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) in the page.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("eval %s: %v", js, err)
	}
	return v
}

// waitJS polls a JavaScript predicate until it is truthy. Evaluation errors
// (a reload replacing the page's context) are retried until the deadline.
func (p *page) waitJS(predicate, what string) {
	p.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+predicate+")"))
		cancel()
		if err == nil && ok {
			return
		}
		lastErr = err
		if p.ctx.Err() != nil {
			break
		}
		time.Sleep(pollEvery)
	}
	state := eval[string](p, `location.pathname + location.search + ' | ' + (document.querySelector('.dock-banners')?.innerText || '') + ' | ' + (document.querySelector('#space')?.innerText || '').slice(0, 600)`)
	p.shot("timeout-" + sanitize(what))
	p.t.Fatalf("waiting for %s (last error %v)\npage: %s", what, lastErr, state)
}

func (p *page) location() string {
	return eval[string](p, `location.pathname + location.search`)
}

func (p *page) click(sel string) {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

var artifactsOnce = sync.OnceValue(func() string {
	if d := os.Getenv("STUDIO_ARTIFACTS"); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		_ = os.MkdirAll(d, 0o755)
		return d
	}
	return ""
})

// screenshotPath is where a screenshot named name (a path relative to
// the artifacts, "firefox/admin-390") goes: into $STUDIO_ARTIFACTS, else
// the test's temporary directory.
func screenshotPath(t *testing.T, name string) string {
	t.Helper()
	dir := artifactsOnce()
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, filepath.FromSlash(name)+".png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// shot saves a screenshot of the page as a test artifact.
func (p *page) shot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := screenshotPath(p.t, name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p.t.Logf("screenshot: %s", path)
}

func sanitize(s string) string {
	return strings.Trim(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(s, "-"), "-")
}

// openDock opens the operator dock.
func (p *page) openDock() {
	p.t.Helper()
	if !eval[bool](p, `document.querySelector('#app').classList.contains('dock-open')`) {
		p.click(".dock-toggle")
	}
	p.waitJS(`document.querySelector('.dock .pill') && !['connecting'].includes(document.querySelector('.dock .pill').dataset.state) || document.querySelector('.transcript .empty')`, "the dock")
}

// send types an instruction into the dock and sends it with Enter, once
// no turn runs (one sent while a turn runs would wait behind it).
func (p *page) send(text string) {
	p.t.Helper()
	p.waitJS(`!document.querySelector('.composer button[type=submit]').disabled && !document.querySelector('.dock').classList.contains('turn-running')`, "the composer to accept a message")
	p.do(chromedp.SendKeys(chromedp.CSS(".composer textarea"), text+"\r"))
}

// keys types keys one after the other at the page (not into a field): what
// a person does for a shortcut sequence such as g then d.
func (p *page) keys(keys ...string) {
	p.t.Helper()
	eval[bool](p, `(document.activeElement && document.activeElement.blur && document.activeElement.blur(), true)`)
	for _, k := range keys {
		p.do(chromedp.KeyEvent(k))
	}
}

// openSignedOut opens a tab in a fresh browser context without the token:
// what a person sees who has not signed in.
func openSignedOut(t *testing.T, d *daemon, path string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // the tab lives as long as ctx
		t.Fatal(err)
	}
	p := &page{t: t, ctx: ctx, d: d}
	p.do(chromedp.Navigate(d.URL + path))
	p.waitJS(`document.querySelector('form.signin input[type=password]') !== null`, "the sign-in form")
	return p
}
