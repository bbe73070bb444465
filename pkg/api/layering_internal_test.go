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
