package main

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/raftmaster/raftmaster/rpc"
)

// goDocs are the doc comments of the package's declarations.
type goDocs struct {
	types  map[string]string            // type → doc
	fields map[string]map[string]string // type → field → doc
	consts []constDoc                   // in source order
	vars   map[string]string            // var → doc
	// messages are the texts of the variables declared as
	// errors.New("text"), by name.
	messages map[string]string
}

// constDoc is a constant: its name, its value when it is a string literal,
// and its comment.
type constDoc struct{ name, value, doc string }

// readDocs parses the package's source in dir (without tests).
func readDocs(dir string) (*goDocs, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, rpcPkgPath, doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	if pkg.Name != "rpc" {
		return nil, fmt.Errorf("%s holds package %q, not rpc", dir, pkg.Name)
	}
	d := &goDocs{types: map[string]string{}, fields: map[string]map[string]string{}, vars: map[string]string{}, messages: map[string]string{}}
	consts, vars := pkg.Consts, pkg.Vars
	for _, ty := range pkg.Types {
		consts = append(consts, ty.Consts...)
		vars = append(vars, ty.Vars...)
		d.types[ty.Name] = prose(ty.Doc)
		for _, spec := range ty.Decl.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok || ts.Name.Name != ty.Name {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			fields := map[string]string{}
			for _, f := range st.Fields.List {
				text := f.Doc.Text()
				if text == "" {
					text = f.Comment.Text()
				}
				for _, n := range f.Names {
					fields[n.Name] = prose(text)
				}
			}
			d.fields[ty.Name] = fields
		}
	}
	sort.Slice(consts, func(i, j int) bool { return consts[i].Decl.Pos() < consts[j].Decl.Pos() })
	for _, v := range consts {
		for _, spec := range v.Decl.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				c := constDoc{name: n.Name, doc: prose(specDoc(v.Decl, vs))}
				if i < len(vs.Values) {
					c.value, _ = stringLit(vs.Values[i])
				}
				d.consts = append(d.consts, c)
			}
		}
	}
	for _, v := range vars {
		for _, spec := range v.Decl.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				d.vars[n.Name] = prose(specDoc(v.Decl, vs))
				if i >= len(vs.Values) {
					continue
				}
				if call, ok := vs.Values[i].(*ast.CallExpr); ok && len(call.Args) == 1 {
					if fn, ok := call.Fun.(*ast.SelectorExpr); ok && fn.Sel.Name == "New" {
						if pkg, ok := fn.X.(*ast.Ident); ok && pkg.Name == "errors" {
							if msg, ok := stringLit(call.Args[0]); ok {
								d.messages[n.Name] = msg
							}
						}
					}
				}
			}
		}
	}
	return d, nil
}

// stringLit returns the value of a string literal.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// check refuses a package whose tables and declarations disagree: a Code
// constant without its rpc.ErrorCodes entry or the other way round, an
// entry whose sentinel is not the documented variable Err<Name>, or a
// Path constant without its endpoint or the other way round.
func (d *goDocs) check() error {
	consts := map[string]string{} // value → name
	for _, c := range d.consts {
		consts[c.value] = c.name
	}
	entries := map[string]rpc.ErrorCode{}
	for _, e := range rpc.ErrorCodes {
		entries[e.Code] = e
		if !strings.HasPrefix(consts[e.Code], "Code") {
			return fmt.Errorf("rpc.ErrorCodes lists %q, which is no Code constant", e.Code)
		}
		if e.Sentinel == nil {
			continue
		}
		v := "Err" + e.Name
		if msg, ok := d.messages[v]; !ok || msg != e.Sentinel.Error() {
			return fmt.Errorf("rpc.ErrorCodes: the sentinel of %q (%q) is not %s = errors.New(%q), which the clients name it after",
				e.Code, e.Sentinel, v, e.Sentinel.Error())
		}
		if !strings.HasPrefix(d.vars[v], v+" means ") {
			return fmt.Errorf("%s has no comment saying %q", v, v+" means ...")
		}
	}
	endpoints := map[string]bool{}
	for _, ep := range rpc.Endpoints {
		endpoints[ep.Path] = true
		if !strings.HasPrefix(consts[ep.Path], "Path") {
			return fmt.Errorf("rpc.Endpoints: %s %s: the path is not a Path constant", ep.Method, ep.Path)
		}
	}
	for _, c := range d.consts {
		if _, ok := entries[c.value]; strings.HasPrefix(c.name, "Code") && c.value != "" && !ok {
			return fmt.Errorf("%s (%q) has no entry in rpc.ErrorCodes", c.name, c.value)
		}
		if strings.HasPrefix(c.name, "Path") && c.value != "" && !endpoints[c.value] {
			return fmt.Errorf("%s (%q) has no entry in rpc.Endpoints", c.name, c.value)
		}
	}
	return nil
}

// specDoc is the comment of one constant or variable: its own doc comment,
// the declaration's when it stands alone, or its line comment.
func specDoc(decl *ast.GenDecl, vs *ast.ValueSpec) string {
	if s := vs.Doc.Text(); s != "" {
		return s
	}
	if !decl.Lparen.IsValid() {
		if s := decl.Doc.Text(); s != "" {
			return s
		}
	}
	return vs.Comment.Text()
}

// prose joins the lines of each paragraph of a comment.
func prose(s string) string {
	paras := strings.Split(strings.TrimSpace(s), "\n\n")
	for i, p := range paras {
		paras[i] = strings.Join(strings.Fields(p), " ")
	}
	return strings.Join(paras, "\n\n")
}

// codes returns the Code constants in source order.
func (d *goDocs) codes() []constDoc {
	var out []constDoc
	for _, c := range d.consts {
		if strings.HasPrefix(c.name, "Code") && c.value != "" {
			out = append(out, c)
		}
	}
	return out
}

func (d *goDocs) codeValues() []string {
	var out []string
	for _, c := range d.codes() {
		out = append(out, c.value)
	}
	return out
}

// leadingStatus matches the status that starts some codes' comments.
var leadingStatus = regexp.MustCompile(`^[0-9]{3}: `)

// codesDescription lists the codes with their status and meaning: the
// comment of the code's sentinel error, else the code's own comment.
func (d *goDocs) codesDescription() string {
	entries := map[string]rpc.ErrorCode{}
	for _, e := range rpc.ErrorCodes {
		entries[e.Code] = e
	}
	var b strings.Builder
	b.WriteString("A stable code; the message is for people. The codes, with the status each is sent with:\n")
	for _, c := range d.codes() {
		e := entries[c.value]
		meaning, status := codeMeanings[c.value], e.Status
		if c.value == rpc.CodeNotLeader {
			status = http.StatusTemporaryRedirect
		}
		if meaning == "" && e.Sentinel != nil {
			v := "Err" + e.Name
			meaning = strings.TrimPrefix(d.vars[v], v+" means ")
		}
		if meaning == "" {
			meaning = leadingStatus.ReplaceAllString(c.doc, "")
		}
		if meaning == "" {
			failf("%s has no comment, no documented sentinel and no entry in codeMeanings", c.name)
		}
		fmt.Fprintf(&b, "\n- `%s` (%d): %s", c.value, status, strings.TrimSuffix(meaning, "."))
	}
	return b.String()
}
