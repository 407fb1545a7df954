package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// printedSetting is one line of --print-config.
type printedSetting struct{ value, source string }

var printedLine = regexp.MustCompile(`^([a-z0-9-]+) = (.*?)\s+# (.+)$`)

// printConfigWith runs `studio serve --print-config ARGS` in this process
// with environ as its whole environment.
func printConfigWith(t *testing.T, environ []string, args ...string) (map[string]printedSetting, string, error) {
	t.Helper()
	root, cfg := newRootConfig()
	cfg.environ = func() []string { return environ }
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(append([]string{"serve", "--print-config"}, args...))
	if err := root.ExecuteContext(t.Context()); err != nil {
		return nil, out.String(), err
	}
	got := map[string]printedSetting{}
	for _, line := range strings.Split(out.String(), "\n") {
		if m := printedLine.FindStringSubmatch(line); m != nil {
			got[m[1]] = printedSetting{m[2], m[3]}
		}
	}
	return got, out.String(), nil
}

// serveFlags are serve's flags and those it inherits, as the command
// line sees them.
func serveFlags(t *testing.T) (*cobra.Command, []*pflag.Flag) {
	t.Helper()
	root, _ := newRootConfig()
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	var flags []*pflag.Flag
	serve.Flags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f) })
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f) })
	return root, flags
}

// TestEveryServeFlagHasItsVariable walks serve's flags: each has a
// STUDIO_ variable its --help line names, and setting that variable alone
// sets the flag (--print-config says so).
func TestEveryServeFlagHasItsVariable(t *testing.T) {
	t.Parallel()
	_, flags := serveFlags(t)
	if len(flags) < 45 {
		t.Fatalf("serve has %d flags", len(flags))
	}
	samples := map[string][]string{"bool": {"true"}, "int": {"7"}, "duration": {"7s", "90d"}, "string": {"sample-value"},
		"stringSlice": {"a.example,b.example"}, "stringArray": {"one=offline;two=offline"}}
	seen := map[string]string{}
	for _, f := range flags {
		switch f.Name {
		case "help", "print-config":
			continue
		case "config": // a file name: TestConfigFilePrecedence reads one
		}
		name := flagEnv(f)
		if name == "" {
			t.Errorf("--%s has no environment variable", f.Name)
			continue
		}
		if other, dup := seen[name]; dup {
			t.Errorf("--%s and --%s share %s", f.Name, other, name)
		}
		seen[name] = f.Name
		if !strings.Contains(f.Usage, "(env "+name) {
			t.Errorf("--%s's help does not name %s: %q", f.Name, name, f.Usage)
		}
		if f.Name == "config" {
			continue
		}
		var got map[string]printedSetting
		var err error
		for _, v := range samples[f.Value.Type()] {
			if got, _, err = printConfigWith(t, []string{name + "=" + v}); err == nil {
				break
			}
		}
		if err != nil || got == nil {
			t.Errorf("%s (a %s) was refused: %v", name, f.Value.Type(), err)
			continue
		}
		if p := got[f.Name]; p.source != "env "+name || p.value == tomlDefault(t, f) {
			t.Errorf("with %s set, --print-config says %s = %s (%s)", name, f.Name, p.value, p.source)
		}
	}
}

// tomlDefault is how --print-config writes the flag's default.
func tomlDefault(t *testing.T, f *pflag.Flag) string {
	line, err := tomlLine(setting{flag: f})
	if err != nil {
		t.Fatal(err)
	}
	_, v, _ := strings.Cut(line, " = ")
	return v
}

// TestConfigFilePrecedence: a flag wins over its variable, the variable
// over the config file, the file over the default; lists and numbers
// come from the file as TOML writes them, and the file may be named by
// STUDIO_CONFIG.
func TestConfigFilePrecedence(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "studio.toml")
	writeFile(t, file, `# settings of the test daemon
shutdown-grace = "3s"
workers = 3
log-level = "debug"
allowed-hosts = ["studio.example.com", "*.studio.example.com"]
provider = ["local=offline,context-tokens=8192"]
exit-on-lease-loss = true
`)
	env := []string{"STUDIO_WORKERS=4", "STUDIO_LOG_LEVEL=warn", "HOME=/nowhere"}
	for _, how := range [][]string{{"--config", file}, {"STUDIO_CONFIG=" + file}} {
		args, environ := []string{"--log-level", "error"}, env
		if strings.HasPrefix(how[0], "--") {
			args = append(args, how...)
		} else {
			environ = append(environ, how...)
		}
		got, out, err := printConfigWith(t, environ, args...)
		if err != nil {
			t.Fatal(err)
		}
		fromFile := "file " + file
		for name, want := range map[string]printedSetting{
			"log-level":          {`"error"`, "flag"},
			"workers":            {"4", "env STUDIO_WORKERS"},
			"shutdown-grace":     {`"3s"`, fromFile},
			"allowed-hosts":      {`["studio.example.com", "*.studio.example.com"]`, fromFile},
			"provider":           {`["local=offline,context-tokens=8192"]`, fromFile},
			"exit-on-lease-loss": {"true", fromFile},
			"max-conns":          {"16384", "default"},
		} {
			if got[name] != want {
				t.Errorf("%v: %s = %+v, want %+v\n%s", how, name, got[name], want, out)
			}
		}
	}
}

// TestUnknownSettingsRefused: a STUDIO_ variable or a config file key no
// flag has stops the start, naming it; the client's variables, a
// provider's api-key-env, Kubernetes' service links and the test suite's
// own variables are known.
func TestUnknownSettingsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		environ []string
		args    []string
		file    string
		refused string // "" for accepted
	}{
		{environ: []string{"STUDIO_SHUTDOWN_GRAC=1s"}, refused: "STUDIO_SHUTDOWN_GRAC"},
		{environ: []string{"STUDIO_ALLOWED_HOST=x.example"}, refused: "STUDIO_ALLOWED_HOST"},
		{environ: []string{"STUDIO_PORT=8765"}, refused: "STUDIO_PORT"},
		{environ: []string{"STUDIO_LOCAL_KEY=k"}, refused: "STUDIO_LOCAL_KEY"},
		{environ: []string{"STUDIO_LOCAL_KEY=k"}, args: []string{"--provider", "local=openai,base-url=http://127.0.0.1:9/v1,api-key-env=STUDIO_LOCAL_KEY"}},
		{environ: []string{"STUDIO_TOKEN=stu_x", "STUDIO_URL=http://127.0.0.1:1", "STUDIO_OPENAI_API_KEY=k", "STUDIO_MODEL_NAME=m",
			"STUDIO_REQUIRE_POSTGRES=1", "STUDIO_ARTIFACTS=/tmp/a", "STUDIO_FIREFOX=/usr/bin/firefox-esr"}},
		{environ: []string{"STUDIO_SERVICE_HOST=10.0.0.1", "STUDIO_SERVICE_PORT=8765", "STUDIO_PORT=tcp://10.0.0.1:8765",
			"STUDIO_PORT_8765_TCP=tcp://10.0.0.1:8765", "STUDIO_PORT_8765_TCP_ADDR=10.0.0.1", "STUDIO_METRICS_SERVICE_PORT_METRICS=9090"}},
		{environ: []string{"STUDIO_WORKERS=many"}, refused: "STUDIO_WORKERS=many"},
		{file: "shutdown-graec = \"1s\"\n", refused: "unknown key shutdown-graec"},
		{file: "[serve]\nworkers = 3\n", refused: "unknown key serve"},
		{file: "workers = [1, 2]\n", refused: "workers: an array"},
		{file: "config = \"other.toml\"\n", refused: "unknown key config"},
		{file: "retention = \"90d\"\nmodel = \"offline\"\n"},
	} {
		args := tc.args
		if tc.file != "" {
			path := filepath.Join(t.TempDir(), "studio.toml")
			writeFile(t, path, tc.file)
			args = append(args, "--config", path)
		}
		_, _, err := printConfigWith(t, tc.environ, args...)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%v %q: refused: %v", tc.environ, tc.file, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%v %q: %v, want a refusal naming %s", tc.environ, tc.file, err, tc.refused)
		case tc.refused != "" && exitCode(err) != exitUsage:
			t.Errorf("%v %q: exit code %d, want the usage error's", tc.environ, tc.file, exitCode(err))
		}
	}
}

// TestPrintConfigMasksSecrets: the database URL's password and a token
// never appear in --print-config.
func TestPrintConfigMasksSecrets(t *testing.T) {
	t.Parallel()
	got, out, err := printConfigWith(t, []string{"STUDIO_DATABASE_URL=postgres://studio:hunter2@db.internal/studio", "STUDIO_TOKEN=stu_topsecret",
		"STUDIO_OPENAI_API_KEY=sk-verysecret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hunter2", "stu_topsecret", "sk-verysecret"} {
		if strings.Contains(out, secret) {
			t.Errorf("--print-config shows %s:\n%s", secret, out)
		}
	}
	if got["database"] != (printedSetting{`"postgres://studio:xxxxx@db.internal/studio"`, "env STUDIO_DATABASE_URL"}) ||
		got["token"].source != "env STUDIO_TOKEN" {
		t.Errorf("database %+v, token %+v", got["database"], got["token"])
	}
}

// TestDeployNamesKnownVariables: every STUDIO_ variable the deployment
// files set or mention is one the binary knows.
func TestDeployNamesKnownVariables(t *testing.T) {
	t.Parallel()
	root, _ := newRootConfig()
	known := knownFlags(root)
	re := regexp.MustCompile(`\bSTUDIO_[A-Z0-9_]+`)
	for _, path := range []string{"../../deploy/studio.env", "../../deploy/studio.service", "../../deploy/compose.yaml",
		"../../Dockerfile", "../../deploy/release.Dockerfile"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for _, n := range re.FindAllString(string(b), -1) {
			if n != "STUDIO_HOST" { // compose.yaml's own, for --allowed-hosts
				env[n] = "x"
			}
		}
		if unknown := unknownVariables(env, known, nil); len(unknown) > 0 {
			t.Errorf("%s names %v, which studio does not know", path, unknown)
		}
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestConfigDocNamesEveryVariable: docs/configuration.md lists each of
// serve's flags with its variable.
func TestConfigDocNamesEveryVariable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, flags := serveFlags(t)
	for _, f := range flags {
		if f.Name == "help" || f.Name == "print-config" {
			continue
		}
		if row := "| `--" + f.Name + "` | `" + flagEnv(f) + "`"; !strings.Contains(doc, row) {
			t.Errorf("docs/configuration.md has no row %q", row)
		}
	}
}
