package doctor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"strings"
	"testing"
)

// declaredIDs are the string constants named ID… in this package's
// non-test files: the finding ids doctor can emit.
func declaredIDs(t *testing.T) map[string]string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pkgs {
		ast.Inspect(p, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				lit, ok := valueAt(vs, i).(*ast.BasicLit)
				if ok && lit.Kind == token.STRING && strings.HasPrefix(name.Name, "ID") {
					s, _ := strconv.Unquote(lit.Value) // a string literal the compiler accepted
					out[name.Name] = s
				}
			}
			return true
		})
		ast.Inspect(p, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if k, isIdent := kvKey(kv, ok); isIdent && k == "ID" {
				if _, lit := kv.Value.(*ast.BasicLit); lit {
					t.Errorf("a finding's ID is a literal %s: declare it as an ID… constant", kv.Value.(*ast.BasicLit).Value)
				}
			}
			return true
		})
	}
	return out
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}

func kvKey(kv *ast.KeyValueExpr, ok bool) (string, bool) {
	if !ok {
		return "", false
	}
	id, isIdent := kv.Key.(*ast.Ident)
	if !isIdent {
		return "", false
	}
	return id.Name, true
}

// TestCatalogueHasEveryID: every finding id declared here is in the
// catalogue `doctor --help` prints, once.
func TestCatalogueHasEveryID(t *testing.T) {
	seen := map[string]int{}
	for _, k := range Catalogue() {
		for _, id := range k.IDs {
			seen[id]++
		}
	}
	declared := declaredIDs(t)
	if len(declared) < 40 {
		t.Fatalf("found %d declared ids; the parse missed some", len(declared))
	}
	for name, id := range declared {
		if seen[id] != 1 {
			t.Errorf("%s (%q) is in the catalogue %d times, want once", name, id, seen[id])
		}
	}
}
