package fsm

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// forbiddenImports may not appear in non-test files: Apply must not read
// the environment, the network or a random source.
var forbiddenImports = []string{"os", "net", "math/rand", "math/rand/v2", "crypto/rand"}

// forbiddenTime are the functions of package time that read the wall
// clock or wait on it. Durations and formatting are fine.
var forbiddenTime = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

// mapRangeAllowed names the functions that may range over a map: they
// sort what they collect.
var mapRangeAllowed = []string{"sortedKeys", "sortedUUIDs"}

// TestDeterminismGuard fails if a non-test file of the package could make
// replicas disagree: see forbiddenImports, forbiddenTime and
// mapRangeAllowed.
func TestDeterminismGuard(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatal("no source files found")
	}
	for _, v := range determinismViolations(fset, files) {
		t.Error(v)
	}

	t.Run("reports each violation", func(t *testing.T) {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "bad.go", guardBadSource, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := determinismViolations(fset, []*ast.File{f})
		want := []string{
			`bad.go:4: imports "os"`, `bad.go:5: imports "net"`, `bad.go:6: imports "net/http"`,
			`bad.go:7: imports "math/rand"`, `bad.go:8: imports "math/rand/v2"`, `bad.go:9: imports "crypto/rand"`,
		}
		for i, fn := range forbiddenTime {
			want = append(want, fmt.Sprintf("bad.go:%d: uses time.%s", 25+i, fn))
		}
		want = append(want,
			"bad.go:35: ranges over map local", "bad.go:37: ranges over map param",
			"bad.go:39: ranges over map v.m", "bad.go:41: ranges over map global",
			"bad.go:43: ranges over map mk()", "bad.go:45: ranges over map maps.Keys(...)",
		)
		if !slices.Equal(got, want) {
			t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// guardBadSource breaks every rule once, and uses the allowed forms once.
const guardBadSource = `package bad

import (
	"os"
	"net"
	"net/http"
	"math/rand"
	rv2 "math/rand/v2"
	crand "crypto/rand"
	"maps"
	tm "time"
)

type holder struct {
	m map[string]int
	l []int
}

var global = map[int]int{}

func mk() map[string]bool { return nil }

func bad(param map[int]int, v holder) {
	_, _, _, _, _ = os.Args, net.IPv4len, http.MethodGet, rand.Int, rv2.Int
	_ = tm.Now
	_ = tm.Since
	_ = tm.Until
	_ = tm.Sleep
	_ = tm.After
	_ = tm.AfterFunc
	_ = tm.Tick
	_ = tm.NewTimer
	_ = tm.NewTicker
	local := make(map[string]int)
	for range local {
	}
	for range param {
	}
	for range v.m {
	}
	for range global {
	}
	for range mk() {
	}
	for range maps.Keys(local) {
	}
	for range v.l {
	}
	_ = tm.Second
	_ = crand.Reader
}

func sortedKeys(m map[int]int) {
	for range m {
	}
}
`

// determinismViolations returns one "file:line: message" for each use of
// a forbidden import, a wall-clock function, or a range over a map outside
// mapRangeAllowed. Map-typed names are found by declaration, which is
// heuristic but needs no type checker: struct fields, package variables
// and functions returning maps by name anywhere in the package; parameters
// and locals per function.
func determinismViolations(fset *token.FileSet, files []*ast.File) []string {
	var out []string
	report := func(n ast.Node, format string, args ...any) {
		p := fset.Position(n.Pos())
		out = append(out, fmt.Sprintf("%s:%d: %s", filepath.Base(p.Filename), p.Line, fmt.Sprintf(format, args...)))
	}
	fields := map[string]bool{}   // map-typed struct fields
	pkgVars := map[string]bool{}  // map-typed package variables
	mapFuncs := map[string]bool{} // functions returning a map
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.StructType:
				for _, field := range n.Fields.List {
					if isMapType(field.Type) {
						for _, name := range field.Names {
							fields[name.Name] = true
						}
					}
				}
			case *ast.FuncDecl:
				if res := n.Type.Results; res != nil && len(res.List) == 1 && isMapType(res.List[0].Type) {
					mapFuncs[n.Name.Name] = true
				}
			}
			return true
		})
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.VAR {
				for _, spec := range gd.Specs {
					collectMapVars(spec, pkgVars)
				}
			}
		}
	}
	for _, f := range files {
		timeName := ""
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if slices.Contains(forbiddenImports, path) || strings.HasPrefix(path, "net/") {
				report(imp, "imports %q", path)
			}
			if path == "time" {
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == timeName && slices.Contains(forbiddenTime, sel.Sel.Name) {
					report(sel, "uses time.%s", sel.Sel.Name)
				}
			}
			return true
		})
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || slices.Contains(mapRangeAllowed, fd.Name.Name) {
				continue
			}
			locals := map[string]bool{}
			ast.Inspect(fd, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Field:
					if isMapType(n.Type) {
						for _, name := range n.Names {
							locals[name.Name] = true
						}
					}
				case *ast.ValueSpec:
					collectMapVars(n, locals)
				case *ast.AssignStmt:
					for i, rhs := range n.Rhs {
						if id, ok := n.Lhs[min(i, len(n.Lhs)-1)].(*ast.Ident); ok && isMapExpr(rhs) {
							locals[id.Name] = true
						}
					}
				case *ast.RangeStmt:
					if what := mapRange(n.X, locals, pkgVars, fields, mapFuncs); what != "" {
						report(n, "ranges over map %s", what)
					}
				}
				return true
			})
		}
	}
	return out
}

// mapRange names x if it looks like a map: a map-typed name, a field
// selector ending in one, a call of a map-returning function, or one of
// the maps package's iterators.
func mapRange(x ast.Expr, locals, pkgVars, fields, mapFuncs map[string]bool) string {
	switch x := x.(type) {
	case *ast.Ident:
		if locals[x.Name] || pkgVars[x.Name] {
			return x.Name
		}
	case *ast.SelectorExpr:
		if fields[x.Sel.Name] {
			return exprString(x)
		}
	case *ast.CallExpr:
		switch fn := x.Fun.(type) {
		case *ast.Ident:
			if mapFuncs[fn.Name] {
				return fn.Name + "()"
			}
		case *ast.SelectorExpr:
			if pkg, ok := fn.X.(*ast.Ident); ok && pkg.Name == "maps" && slices.Contains([]string{"Keys", "Values", "All"}, fn.Sel.Name) {
				return "maps." + fn.Sel.Name + "(...)"
			}
			if mapFuncs[fn.Sel.Name] {
				return exprString(fn) + "()"
			}
		}
	}
	return ""
}

func exprString(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	}
	return "?"
}

// collectMapVars adds the names of a var spec that is map-typed or
// initialised with a map.
func collectMapVars(spec ast.Spec, into map[string]bool) {
	vs, ok := spec.(*ast.ValueSpec)
	if !ok {
		return
	}
	for i, name := range vs.Names {
		if isMapType(vs.Type) || (i < len(vs.Values) && isMapExpr(vs.Values[i])) {
			into[name.Name] = true
		}
	}
}

func isMapType(x ast.Expr) bool {
	_, ok := x.(*ast.MapType)
	return ok
}

// isMapExpr reports a map literal or make(map...).
func isMapExpr(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.CompositeLit:
		return isMapType(x.Type)
	case *ast.CallExpr:
		if fn, ok := x.Fun.(*ast.Ident); ok && fn.Name == "make" && len(x.Args) > 0 {
			return isMapType(x.Args[0])
		}
	}
	return false
}
