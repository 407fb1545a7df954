package coordinator_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// maxTwoWayPairs bounds the engine's files that call each other both ways.
// A pair that does is one concern cut in two, or a helper that calls back
// up into its caller's file: either makes a reader hold both files at once.
const maxTwoWayPairs = 5

// TestFewFilesCallEachOther fails when more than maxTwoWayPairs pairs of
// the engine's files call each other in both directions: a top-level
// function or method of one calls (or takes as a value) one declared in
// the other, and the other back.
func TestFewFilesCallEachOther(t *testing.T) {
	t.Parallel()
	pairs := twoWayPairs(t)
	if len(pairs) > maxTwoWayPairs {
		t.Errorf("%d pairs of files call each other both ways (at most %d): move a function to the file of its concern\n\t%s",
			len(pairs), maxTwoWayPairs, strings.Join(pairs, "\n\t"))
	}
	t.Logf("%d two-way file pairs: %s", len(pairs), strings.Join(pairs, ", "))
}

// twoWayPairs type-checks the package's non-test files against its
// imports' export data and lists "a.go ↔ b.go (a's calls into b; b's
// calls into a)" for each unordered pair of files whose functions reach
// into each other.
func twoWayPairs(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	exports := exportData(t)
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	pkg, err := conf.Check("engine", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}

	calls := map[[2]string][]string{} // from file, to file: "caller→callee"
	for _, f := range files {
		from := fset.Position(f.Pos()).Filename
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				fn, ok := info.Uses[id].(*types.Func)
				if !ok || fn.Pkg() != pkg {
					return true
				}
				if to := fset.Position(fn.Pos()).Filename; to != from {
					k, call := [2]string{from, to}, fd.Name.Name+"→"+fn.Name()
					if !slices.Contains(calls[k], call) {
						calls[k] = append(calls[k], call)
					}
				}
				return true
			})
		}
	}
	var pairs []string
	for c, there := range calls {
		back := calls[[2]string{c[1], c[0]}]
		if c[0] < c[1] && back != nil {
			sort.Strings(there)
			sort.Strings(back)
			pairs = append(pairs, fmt.Sprintf("%s ↔ %s (%s; %s)", c[0], c[1], strings.Join(there, " "), strings.Join(back, " ")))
		}
	}
	sort.Strings(pairs)
	return pairs
}

// exportData maps each import path the package depends on to its compiled
// export data, which go list builds (or finds in the build cache).
func exportData(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), " "); ok && file != "" {
			m[path] = file
		}
	}
	return m
}
