package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 8, input 10: the master key is compared in constant time (isMasterKey, over sha256
// digests with crypto/subtle), never with == — no expression of this package compares a
// MasterKey with anything but "" (the "no master key" check).
func TestMasterKeyComparedInConstantTime(t *testing.T) {
	s := &Server{}
	s.MasterKey = "sk-master-1234"
	s.masterSum = New(Deps{MasterKey: s.MasterKey}).masterSum
	require.True(t, s.isMasterKey("sk-master-1234"))
	for _, k := range []string{"", "sk-master-123", "sk-master-12345", "SK-MASTER-1234", "sk-master-1234 "} {
		require.False(t, s.isMasterKey(k), "%q", k)
	}

	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			be, ok := n.(*ast.BinaryExpr)
			if !ok || (be.Op != token.EQL && be.Op != token.NEQ) {
				return true
			}
			for _, side := range [][2]ast.Expr{{be.X, be.Y}, {be.Y, be.X}} {
				if isMasterKeyExpr(side[0]) {
					lit, ok := side[1].(*ast.BasicLit)
					require.True(t, ok && lit.Value == `""`, "%s: the master key compared with %s (use isMasterKey)", fset.Position(be.Pos()), be.Op)
				}
			}
			return true
		})
	}
}

func isMasterKeyExpr(e ast.Expr) bool {
	switch v := e.(type) {
	case *ast.SelectorExpr:
		return v.Sel.Name == "MasterKey"
	case *ast.Ident:
		return v.Name == "MasterKey"
	}
	return false
}
