package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// pkg/api writes through pkg/admin only: no handler applies a row to a registry by hand
// (writer-local apply is admin.Write's, after its commit) and none opens a transaction.
func TestNoHandWrittenApplyOrTransaction(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Apply" || sel.Sel.Name == "Tx") {
				t.Errorf("%s: a call to .%s: management writes go through admin.Write", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

// pkg/api is HTTP only (issue 18): it imports neither pkg/store nor pgx (the use-cases and
// the call pipeline reach the database; their types come through pkg/admin), nor does the
// call pipeline's core live here (pkg/call, no echo).
func TestAPIImportsNoStoreAndCallNoEcho(t *testing.T) {
	check := func(glob string, banned ...string) {
		files, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				for _, b := range banned {
					if p == b || strings.HasPrefix(p, b+"/") {
						t.Errorf("%s imports %s", name, p)
					}
				}
			}
		}
	}
	check("*.go", "lockstep/pkg/store", "github.com/jackc/pgx", "github.com/jackc/pgx/v5")
	check("../call/*.go", "github.com/labstack/echo", "github.com/labstack/echo/v4", "lockstep/pkg/api")
}
