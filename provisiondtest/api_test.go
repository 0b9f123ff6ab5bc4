package provisiondtest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

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
			if n == nil {
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

// testdata/outside is a module of its own that uses the kit as another
// repository would (a replace of this module); go vet type-checks it, so
// whatever its test uses of the kit is usable from outside. It runs on a
// copy, with the replace pointing at this checkout and this module's
// go.sum. Completing the copy's go.mod reads the go.mod files of modules
// deeper in the graph than building this module does (gopkg.in/yaml.v3,
// required by a requirement's requirement), which a fresh module cache
// lacks: those come through $GOPROXY, as this module's own do.
func TestUsableFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds another module")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "outside_test.go"} {
		b, err := os.ReadFile(filepath.Join("testdata", "outside", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "go.mod" {
			b = []byte(strings.Replace(string(b), "=> ../../..", "=> "+root, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "vet", "./...")
	cmd.Dir = dir
	// -mod=mod completes the copy's go.mod from this module's requirements.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOSUMDB=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet of testdata/outside (a module that imports the kit): %v\n%s", err, out)
	}
}
