package coordinator_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The engine's layers, as the package comment draws them: the public API
// puts requests in an owner's mailbox, the owner's steps call the
// transitions, the transitions call the store. The API is what apiFiles
// declare and the exported methods of Coordinator; the owner's steps are
// the methods of owner, wherever they are.
var (
	apiFiles        = []string{"turns.go", "decisions.go"}
	transitionFiles = []string{"transitions.go"}
)

// TestLayersPointOneWay fails when a dependency runs back up: an owner's
// step that calls the public API (a decision or a turn sent from inside
// the turn would wait on the owner that sends it), or a transition that
// reaches an owner (a transition depends on its params alone).
func TestLayersPointOneWay(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	for _, name := range append(append([]string{}, apiFiles...), transitionFiles...) {
		if files[name] == nil {
			t.Fatalf("%s is gone: update the layers here and in the package comment", name)
		}
	}

	api := map[string]bool{}
	ownerMethods := map[string]bool{}
	for name, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			switch recv := receiver(fd); {
			case recv == "owner":
				ownerMethods[fd.Name.Name] = true
			case recv == "Coordinator" && fd.Name.IsExported(), slices.Contains(apiFiles, name):
				api[fd.Name.Name] = true
			}
		}
	}

	var bad []string
	for name, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && receiver(fd) == "owner" {
				for _, call := range coordinatorCalls(fd) {
					if api[call] {
						bad = append(bad, name+": the owner's "+fd.Name.Name+" calls the public API's "+call)
					}
				}
			}
		}
	}
	for _, name := range transitionFiles {
		ast.Inspect(files[name], func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if n.Name == "owner" || n.Name == "owners" {
					bad = append(bad, name+": a transition reaches an owner ("+n.Name+")")
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && ownerMethods[sel.Sel.Name] {
					bad = append(bad, name+": a transition calls the owner's "+sel.Sel.Name)
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// receiver is the name of fd's receiver type ("" for a function).
func receiver(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// coordinatorCalls lists the methods fd calls on the Coordinator: c.name(...)
// or o.c.name(...), the package's names for it.
func coordinatorCalls(fd *ast.FuncDecl) []string {
	var out []string
	ast.Inspect(fd, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		switch x := sel.X.(type) {
		case *ast.Ident:
			if x.Name == "c" {
				out = append(out, sel.Sel.Name)
			}
		case *ast.SelectorExpr:
			if x.Sel.Name == "c" {
				out = append(out, sel.Sel.Name)
			}
		}
		return true
	})
	return out
}

// TestPackageCommentMapsEveryFile fails when a file of the engine is
// missing from the package comment's "Where to read": a newcomer reads
// the map, not the directory.
func TestPackageCommentMapsEveryFile(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	_, section, ok := strings.Cut(doc, "# Where to read")
	if !ok {
		t.Fatal(`the package comment has no "# Where to read"`)
	}
	section, _, _ = strings.Cut(section, "\n# ")
	mapped := map[string]bool{}
	for _, word := range strings.FieldsFunc(section, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == ',' || r == ':' || r == '\'' }) {
		mapped[word] = true
	}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") || name == "doc.go" {
			continue
		}
		if !mapped[name] {
			t.Errorf("%s is not in the package comment's \"Where to read\"", name)
		}
	}
}
