package provisiondtest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// internalDaemonMethod is the one exported name that still mentions an
// internal package: Server.Daemon, which this module's tests call in many
// places; internal/testkit.Daemon is its replacement and the method goes
// once they use it. Nothing else may.
const internalDaemonMethod = "Server.Daemon"

// Another module cannot import an internal package, so nothing in the
// kit's exported API (signatures, exported fields, the types of exported
// constants and variables) may name a type of one.
func TestExportedAPINamesNoInternalType(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]string{} // the file's names of internal packages
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains("/"+path+"/", "/internal/") {
				continue
			}
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			internal[local] = path
		}
		check := func(what string, n ast.Node) {
			checked++
			if n == nil || what == internalDaemonMethod {
				return
			}
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && internal[x.Name] != "" {
						t.Errorf("%s: exported %s names %s.%s (package %s cannot be imported from another module)",
							fset.Position(sel.Pos()), what, x.Name, sel.Sel.Name, internal[x.Name])
					}
				}
				return true
			})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				what := d.Name.Name
				if d.Recv != nil {
					recv := receiverType(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					what = recv + "." + what
				}
				if d.Name.IsExported() {
					check(what, d.Type)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							check(s.Name.Name, exportedPart(s))
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								check(n.Name, s.Type)
								for _, v := range s.Values {
									check(n.Name, v)
								}
							}
						}
					}
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d exported names checked: the test no longer sees the package", checked)
	}
}

// receiverType is the name of a method's receiver type.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// exportedPart is what of a type declaration another package sees: its
// type parameters and, of a struct, the exported fields.
func exportedPart(s *ast.TypeSpec) ast.Node {
	st, ok := s.Type.(*ast.StructType)
	if !ok {
		return &ast.TypeSpec{Name: s.Name, TypeParams: s.TypeParams, Type: s.Type}
	}
	fields := &ast.FieldList{}
	for _, f := range st.Fields.List {
		exported := len(f.Names) == 0 && ast.IsExported(receiverType(f.Type)) // embedded
		for _, n := range f.Names {
			exported = exported || n.IsExported()
		}
		if exported {
			fields.List = append(fields.List, f)
		}
	}
	return &ast.TypeSpec{Name: s.Name, TypeParams: s.TypeParams, Type: &ast.StructType{Fields: fields}}
}
