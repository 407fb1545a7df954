package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/studio/operator/internal/model/anthropic"
	"github.com/studio/operator/internal/model/openai"
)

// Settings: every flag that configures the daemon, and the few the
// clients share, also comes from an environment variable and from the
// TOML file --config (STUDIO_CONFIG) names. The variable's name is made
// from the flag's (--shutdown-grace: STUDIO_SHUTDOWN_GRACE), except for
// the few whose older names stay (envNames); the file's keys are the
// flags' names. A flag on the command line wins over the variable, the
// variable over the file, the file over the default. A STUDIO_ variable
// or a file key that no flag has is a start-up error: a misspelt setting
// must not be ignored. docs/configuration.md says all this to operators.

// Pflag annotations of a flag with a variable.
const (
	envAnnotation    = "studio_env"    // the variable's name
	secretAnnotation = "studio_secret" // --print-config masks the value
	// usedAnnotation: the variable is read where the value is used
	// (STUDIO_TOKEN, whose source a refused client names), not resolved
	// into the flag.
	usedAnnotation = "studio_env_read_where_used"
)

// envNames are the variables whose names predate the generated ones.
var envNames = map[string]string{
	"database":              "STUDIO_DATABASE_URL",
	"server":                "STUDIO_URL",
	"token":                 "STUDIO_TOKEN",
	"provider":              "STUDIO_PROVIDERS",
	"auth-proxy-group-role": "STUDIO_AUTH_PROXY_GROUP_ROLES",
}

// envListSeparators: lists whose entries hold commas take another
// separator in their variable (--provider NAME=KIND,model=M).
var envListSeparators = map[string]string{"provider": ";"}

// envName is the variable of the flag name.
func envName(flag string) string {
	if n, ok := envNames[flag]; ok {
		return n
	}
	return "STUDIO_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv gives each named flag of fs (every flag when none are named)
// its variable, and says the variable's name on the flag's help line.
func bindEnv(fs *pflag.FlagSet, names ...string) {
	fs.VisitAll(func(f *pflag.Flag) {
		if (len(names) > 0 && !slices.Contains(names, f.Name)) || flagEnv(f) != "" {
			return
		}
		name := envName(f.Name)
		_ = fs.SetAnnotation(f.Name, envAnnotation, []string{name})
		hint := "env " + name
		if sep, ok := envListSeparators[f.Name]; ok {
			hint += ", entries separated by " + sep
		}
		f.Usage += " (" + hint + ")"
	})
}

// markSecret makes --print-config mask the flag's value.
func markSecret(fs *pflag.FlagSet, name string) {
	_ = fs.SetAnnotation(name, secretAnnotation, []string{"true"})
}

// readWhereUsed: the flag's variable is read by the code that uses it.
func readWhereUsed(fs *pflag.FlagSet, name string) {
	_ = fs.SetAnnotation(name, usedAnnotation, []string{"true"})
}

func flagEnv(f *pflag.Flag) string {
	if v := f.Annotations[envAnnotation]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// setting is one resolved flag of the command that runs.
type setting struct {
	flag   *pflag.Flag
	env    string // its variable
	source string // "flag", "env NAME", "file PATH" or "default"
	// used is the variable's value of a flag whose variable is read
	// where it is used (the flag itself stays empty).
	used string
}

// settings is the resolved configuration of the command that runs.
type settings struct {
	file string // the config file read, "" for none
	list []setting
}

// resolveSettings fills the flags of cmd that the command line left
// unset from their variables, then from the config file, and refuses a
// STUDIO_ variable or file key no command knows. root is the command tree.
func resolveSettings(root, cmd *cobra.Command, environ []string) (*settings, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	known := knownFlags(root)
	s := &settings{}
	fs := cmd.Flags()
	if f := fs.Lookup("config"); f != nil {
		s.file = f.Value.String()
		if !f.Changed && env[flagEnv(f)] != "" {
			s.file = env[flagEnv(f)]
		}
	}
	var file map[string]any
	if s.file != "" {
		if _, err := toml.DecodeFile(s.file, &file); err != nil {
			return nil, fmt.Errorf("config file %s: %w", s.file, err)
		}
		var unknown []string
		for k := range file {
			if _, ok := known[k]; !ok || k == "config" {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			return nil, fmt.Errorf("config file %s: unknown key %s: the keys are the names of studio's flags (studio serve --help), e.g. shutdown-grace = \"10s\"",
				s.file, strings.Join(unknown, ", "))
		}
	}
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		name := flagEnv(f)
		if name == "" {
			return
		}
		st := setting{flag: f, env: name, source: "default"}
		switch v, fromEnv := env[name]; {
		case f.Changed:
			st.source = "flag"
		case f.Annotations[usedAnnotation] != nil:
			if v != "" {
				st.source, st.used = "env "+name, v
			}
		case fromEnv && v != "":
			if err := setFromEnv(f, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%s: %w", name, v, err))
			}
			st.source = "env " + name
		default:
			fv, ok := file[f.Name]
			if !ok || f.Name == "config" {
				break
			}
			if err := setFromFile(f, fv); err != nil {
				errs = append(errs, fmt.Errorf("config file %s: %s: %w", s.file, f.Name, err))
			}
			st.source = "file " + s.file
		}
		s.list = append(s.list, st)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if unknown := unknownVariables(env, known, providerKeyVariables(fs)); len(unknown) > 0 {
		return nil, fmt.Errorf("unknown environment variable %s: no setting of studio has that name (studio serve --help lists each flag's variable; docs/configuration.md)",
			strings.Join(unknown, ", "))
	}
	return s, nil
}

// knownFlags are the flags with a variable anywhere in the command tree,
// by name: a config file may hold serve's settings while doctor reads it.
func knownFlags(root *cobra.Command) map[string]*pflag.Flag {
	known := map[string]*pflag.Flag{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.Flags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if flagEnv(f) != "" {
					known[f.Name] = f
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return known
}

// setFromEnv sets f from its variable: a list's entries are separated by
// commas (or by the flag's own separator).
func setFromEnv(f *pflag.Flag, v string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		sep := ","
		if s, ok := envListSeparators[f.Name]; ok {
			sep = s
		}
		return sv.Replace(splitNonEmpty(v, sep))
	}
	return f.Value.Set(v)
}

// setFromFile sets f from a TOML value: a string, number or boolean, or
// for a list flag an array of them.
func setFromFile(f *pflag.Flag, v any) error {
	scalar := func(v any) (string, error) {
		switch x := v.(type) {
		case string:
			return x, nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64), nil
		case bool:
			return strconv.FormatBool(x), nil
		}
		return "", fmt.Errorf("a %T: want a string, number or boolean", v)
	}
	sv, isList := f.Value.(pflag.SliceValue)
	if arr, ok := v.([]any); ok {
		if !isList {
			return errors.New("an array: this setting takes one value")
		}
		vals := make([]string, len(arr))
		for i, e := range arr {
			s, err := scalar(e)
			if err != nil {
				return err
			}
			vals[i] = s
		}
		return sv.Replace(vals)
	}
	s, err := scalar(v)
	if err != nil {
		return err
	}
	if isList {
		return sv.Replace([]string{s})
	}
	return f.Value.Set(s)
}

// modelVariables are the STUDIO_ variables the model providers read.
var modelVariables = []string{openai.EnvAPIKey, openai.EnvBaseURL, openai.EnvModel, anthropic.EnvBaseURL, anthropic.EnvModel}

// harnessVariables are the test suite's own (CI sets them for go test,
// and a daemon a test starts inherits them); the binary reads none.
var harnessVariables = []string{"STUDIO_ARTIFACTS", "STUDIO_BIN", "STUDIO_CHAOS_DURATION", "STUDIO_CHAOS_SEED", "STUDIO_CHROMIUM", "STUDIO_FIREFOX", "STUDIO_GRAY_STRICT",
	"STUDIO_LITESTREAM", "STUDIO_POSTGRES_BIN", "STUDIO_TEST_LOGS", "STUDIO_UPDATE_FIXTURES"}

// serviceLink matches the variables Kubernetes sets for a Service named
// studio or studio-* (STUDIO_SERVICE_HOST, STUDIO_PORT_8765_TCP_ADDR...),
// and Docker's legacy links.
var serviceLink = regexp.MustCompile(`^STUDIO(_[A-Z0-9_]+)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?)$`)

// unknownVariables are the STUDIO_ variables of env that nothing reads.
func unknownVariables(env map[string]string, known map[string]*pflag.Flag, extra []string) []string {
	names := map[string]bool{}
	for _, f := range known {
		names[flagEnv(f)] = true
	}
	for _, n := range slices.Concat(modelVariables, harnessVariables, extra) {
		names[n] = true
	}
	var unknown []string
	for k := range env {
		switch {
		case !strings.HasPrefix(k, "STUDIO_"), names[k], strings.HasPrefix(k, "STUDIO_REQUIRE_"):
		case serviceLink.MatchString(k) && (!strings.HasSuffix(k, "_PORT") || strings.HasSuffix(k, "_SERVICE_PORT") || strings.Contains(env[k], "://")):
		default:
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	return unknown
}

// providerKeyVariables are the variables --provider entries name with
// api-key-env: any name may hold a key.
func providerKeyVariables(fs *pflag.FlagSet) []string {
	f := fs.Lookup("provider")
	if f == nil {
		return nil
	}
	sv, ok := f.Value.(pflag.SliceValue)
	if !ok {
		return nil
	}
	var out []string
	for _, e := range sv.GetSlice() {
		if ps, err := parseProviderSpec(e); err == nil && ps.apiKeyEnv != "" {
			out = append(out, ps.apiKeyEnv)
		}
	}
	return out
}

// printConfig writes the resolved configuration as a TOML file would
// hold it, each value with its source; secrets masked. The model
// providers' variables, which are not flags, follow as comments.
func printConfig(w io.Writer, cmd *cobra.Command, s *settings) error {
	fmt.Fprintf(w, "# %s: the effective configuration. Each value's source is flag, env VARIABLE, file PATH or default\n", cmd.CommandPath())
	fmt.Fprintf(w, "# (a flag wins over its variable, the variable over the file, the file over the default); secrets masked.\n")
	if s.file != "" {
		fmt.Fprintf(w, "# config file: %s\n", s.file)
	}
	list := slices.Clone(s.list)
	slices.SortFunc(list, func(a, b setting) int { return strings.Compare(a.flag.Name, b.flag.Name) })
	for _, st := range list {
		if st.flag.Name == "config" {
			continue
		}
		line, err := tomlLine(st)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-60s # %s\n", line, st.source)
	}
	var set []string
	for _, n := range slices.Concat(modelVariables, []string{openai.EnvAPIKeyFallback, anthropic.EnvAPIKey}) {
		if v := os.Getenv(n); v != "" {
			if strings.Contains(n, "KEY") {
				v = "(set, masked)"
			}
			set = append(set, n+"="+v)
		}
	}
	if len(set) > 0 {
		slices.Sort(set)
		fmt.Fprintf(w, "# model providers' variables: %s\n", strings.Join(set, ", "))
	}
	return nil
}

// tomlLine is `name = value` for one setting, its value masked when secret.
func tomlLine(st setting) (string, error) {
	f := st.flag
	var v any = f.Value.String()
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		v = append([]string{}, sv.GetSlice()...)
	} else {
		switch f.Value.Type() {
		case "bool":
			v, _ = strconv.ParseBool(f.Value.String())
		case "int":
			n, _ := strconv.ParseInt(f.Value.String(), 10, 64)
			v = n
		}
	}
	if f.Annotations[secretAnnotation] != nil {
		v = maskSecret(f.Name, cmp.Or(st.used, f.Value.String()))
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(map[string]any{f.Name: v}); err != nil {
		return "", err
	}
	return strings.TrimSpace(buf.String()), nil
}

// maskSecret hides a secret value: a URL's password, or the whole value.
func maskSecret(name, v string) string {
	if v == "" {
		return ""
	}
	if u, err := url.Parse(v); err == nil && u.Scheme != "" && u.Host != "" {
		return u.Redacted()
	}
	if name == "database" {
		return "(a connection string, masked)"
	}
	return "(set, masked)"
}
