package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestReadableTimes(t *testing.T) {
	in := `{"id":"r1","createdAt":1748750400.123456,"endedAt":null,"renewSeconds":15.5,"count":3,` +
		`"details":{"confirmed_at":1748750401,"note":"at 1748750400"},"runs":[{"updatedAt":1748750402.5}],` +
		`"next":[1748750400,1748754000],"counts":[1,2],"at":0,"title":"createdAt"}`
	got, err := readableTimes([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"r1","createdAt":"2025-06-01T04:00:00.123456Z","endedAt":null,"renewSeconds":15.5,"count":3,` +
		`"details":{"confirmed_at":"2025-06-01T04:00:01Z","note":"at 1748750400"},"runs":[{"updatedAt":"2025-06-01T04:00:02.5Z"}],` +
		`"next":["2025-06-01T04:00:00Z","2025-06-01T05:00:00Z"],"counts":[1,2],"at":"1970-01-01T00:00:00Z","title":"createdAt"}`
	if string(got) != want {
		t.Fatalf("readableTimes:\n got %s\nwant %s", got, want)
	}
	if _, err := readableTimes([]byte(`{"createdAt":`)); err == nil {
		t.Fatal("a truncated document passed")
	}
}

// durationNames are the number members of the wire types that are not
// times, though they count seconds.
var durationNames = map[string]bool{"renewSeconds": true, "expirySeconds": true, "afterSeconds": true}

// TestWireTimesFollowTheNamingRule reads the wire types (internal/protocol,
// internal/studio): every float64 member is a time whose name
// isTimeName accepts (or a duration listed above), and no member of
// another number type has a time's name, so -o json converts exactly the
// times.
func TestWireTimesFollowTheNamingRule(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range []string{"../../internal/protocol", "../../internal/studio"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				field, ok := n.(*ast.Field)
				if !ok || field.Tag == nil {
					return true
				}
				tag, _ := strconv.Unquote(field.Tag.Value)
				name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
				if name == "" || name == "-" {
					return true
				}
				typ := numberType(field.Type)
				switch {
				case typ == "float64" && !isTimeName(name) && !durationNames[name]:
					t.Errorf("%s: float64 member %q is neither a time by name nor a listed duration", fset.Position(field.Pos()), name)
				case typ != "" && typ != "float64" && isTimeName(name):
					t.Errorf("%s: %s member %q has a time's name but is not a time", fset.Position(field.Pos()), typ, name)
				case typ != "":
					checked++
				}
				return true
			})
		}
	}
	if checked < 40 {
		t.Fatalf("only %d number members found: is the scan reading the wire types?", checked)
	}
}

// numberType is the number type of a field (through pointers and
// slices), or "" when it is not a number.
func numberType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return numberType(x.X)
	case *ast.ArrayType:
		return numberType(x.Elt)
	case *ast.Ident:
		switch x.Name {
		case "float64", "float32", "int", "int64", "int32", "uint", "uint64", "uint32":
			return x.Name
		}
	}
	return ""
}

// decodeCLIJSON decodes a JSON document the CLI printed into v, the wire
// types included: it fails the test unless every time in it is an RFC
// 3339 string in UTC, then gives the times back as Unix seconds, the
// wire's form, so that the wire types decode them.
func decodeCLIJSON(t testing.TB, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not JSON (%v): %s", err, out)
	}
	var wire func(name string, x any) any
	wire = func(name string, x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = wire(k, e)
			}
		case []any:
			for i, e := range x {
				x[i] = wire(name, e)
			}
		case json.Number:
			if isTimeName(name) {
				t.Errorf("%q is a number (%s), not an RFC 3339 time: %s", name, x, out)
			}
		case string:
			if isTimeName(name) {
				ts, err := time.Parse(time.RFC3339Nano, x)
				if err != nil || !strings.HasSuffix(x, "Z") {
					t.Errorf("%q is %q, not an RFC 3339 time in UTC: %s", name, x, out)
					return x
				}
				return json.Number(strconv.FormatFloat(float64(ts.UnixMicro())/1e6, 'f', -1, 64))
			}
		}
		return x
	}
	b, err := json.Marshal(wire("", doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("not the wire's shape (%v): %s", err, out)
	}
}
