package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// Every code of package params has its Err value here, spelled
// Err<Name> = params.Code(params.Code<Name>).
func TestEveryCodeHasAnErrValue(t *testing.T) {
	codes := constNames(t, "../params/error.go", "Code")
	errs := map[string]string{}
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				call, ok := vs.Values[i].(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					continue
				}
				if sel, ok := call.Args[0].(*ast.SelectorExpr); ok {
					errs[n.Name] = sel.Sel.Name
				}
			}
		}
	}
	if len(codes) < 30 {
		t.Fatalf("found %d codes in params: the parse is wrong", len(codes))
	}
	for _, c := range codes {
		name := "Err" + strings.TrimPrefix(c, "Code")
		if errs[name] != c {
			t.Errorf("no %s = params.Code(params.%s) in errors.go", name, c)
		}
	}
	if len(errs) != len(codes) {
		t.Errorf("errors.go has %d values for %d codes", len(errs), len(codes))
	}
}

func constNames(t *testing.T, path, prefix string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, prefix) {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}
