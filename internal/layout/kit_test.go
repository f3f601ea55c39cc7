package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// kit lists the test kit (docs/layout.md, "The test kit"), relative to the
// repository's root: the packages that open listeners and build and start
// gateways for every other test; gateway/kit_test.go, the gateway
// package's in-package kit (Go's import-cycle rule keeps gateway's own tests
// from importing gateway/internal/gatewaytest); and gateway/fastengine/kit_test.go,
// the fastengine package's in-package kit (newPublicServer is unexported,
// so only fastengine's own tests can build that server). A directory covers
// the files below it.
var kit = []string{
	"internal/testkit",
	"gateway/internal/gatewaytest",
	"internal/redistest",
	"internal/sluicetest",
	"internal/faultload",
	"internal/testcert",
	"internal/layout",
	gatewayKit,
	"gateway/fastengine/kit_test.go",
}

// kitModules are the nested modules (relative to the repository's root)
// whose tests the kit's rule covers as it covers the root module's.
var kitModules = []string{"gateway"}

// gatewayKit is the gateway package's in-package kit. It comes with the
// conversion of the gateway tests in pending, so it may be missing while
// pending lists a file under gateway/, and must exist once none is left.
const gatewayKit = "gateway/kit_test.go"

// pending lists the test files outside the kit that still open listeners
// or build and start servers themselves. The list only shrinks: the test
// fails for a listed file that no longer does so, and for any unlisted
// file that does.
var pending = map[string]bool{}

// TestTestKit: no test file outside the kit (and pending) calls
// net.Listen or net.ListenTCP, builds a gateway's server (gateway.NewServer,
// fastengine.NewServer, newPublicServer) or starts one (.Start() on a
// *gateway.Server); such a test uses internal/testkit and
// gateway/internal/gatewaytest instead, in the library module and in the
// gateway module alike. Every path in kit exists, and every file in pending
// still does one of these.
func TestTestKit(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkKit(root, kit, pending)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// checkKit returns the problems TestTestKit reports for the module at root:
// a kit path that does not exist (gatewayKit excepted while pending lists a
// file under gateway/), a call only the kit may make in a test file outside
// kit and pending, and a file in pending that makes no such call. It skips
// testdata, directories Go ignores (a name starting with "." or "_") and
// directories with a go.mod of their own other than those in kitModules
// (bench/ is a module of its own; gateway/ is one too, but its tests follow
// the kit's rule).
func checkKit(root string, kit []string, pending map[string]bool) ([]string, error) {
	var problems []string
	pendingGateway := false
	for file, ok := range pending {
		pendingGateway = pendingGateway || ok && strings.HasPrefix(file, "gateway/")
	}
	for _, p := range kit {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			if p == gatewayKit && pendingGateway && os.IsNotExist(err) {
				continue
			}
			problems = append(problems, fmt.Sprintf("kit lists %s: %v", p, err))
		}
	}
	violating := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && !slices.Contains(kitModules, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, "_test.go") || inKit(kit, rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		found := kitViolations(fset, rel, f)
		if len(found) == 0 {
			return nil
		}
		violating[rel] = true
		if pending[rel] {
			return nil
		}
		for _, v := range found {
			problems = append(problems, v+`; use internal/testkit or gateway/internal/gatewaytest (docs/layout.md, "The test kit")`)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, file := range slices.Sorted(maps.Keys(pending)) {
		if pending[file] && !violating[file] {
			problems = append(problems, fmt.Sprintf("pending lists %s, which no longer opens a listener or builds or starts a server itself (or is gone): remove it from pending", file))
		}
	}
	return problems, nil
}

// inKit reports whether the file rel (slash-separated, relative to the
// module root) belongs to the kit.
func inKit(kit []string, rel string) bool {
	for _, p := range kit {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// kitViolations returns "file:line: what" for each call in f, the file rel,
// that only the kit may make. The check is syntactic: a package is known
// by the name the file imports it under; a *gateway.Server by a name the
// file binds to one (a variable or field of that type, or the result of a
// call that returns one: gateway.NewServer, gatewaytest.Start, or a
// function of the file declared to return it).
func kitViolations(fset *token.FileSet, rel string, f *ast.File) []string {
	imports := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = path
	}
	dir := filepath.ToSlash(filepath.Dir(rel))
	inGateway := dir == "gateway" && f.Name.Name == "gateway"
	inFastengine := dir == "gateway/fastengine" && f.Name.Name == "fastengine"

	// pkgSel reports whether e is pkg.sel for the import path pkg.
	pkgSel := func(e ast.Expr, pkg string, sel ...string) bool {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := s.X.(*ast.Ident)
		return ok && imports[x.Name] == pkg && slices.Contains(sel, s.Sel.Name)
	}
	ident := func(e ast.Expr, name string) bool {
		id, ok := e.(*ast.Ident)
		return ok && id.Name == name
	}
	// newServer reports whether fun names NewServer of package gateway
	// or fastengine, and which.
	newServer := func(fun ast.Expr) string {
		switch {
		case pkgSel(fun, module+"/gateway", "NewServer") || inGateway && ident(fun, "NewServer"):
			return "gateway.NewServer"
		case pkgSel(fun, module+"/gateway/fastengine", "NewServer") || inFastengine && ident(fun, "NewServer"):
			return "fastengine.NewServer"
		}
		return ""
	}
	// isServerType reports whether e is gateway.Server or *gateway.Server.
	isServerType := func(e ast.Expr) bool {
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
		}
		return pkgSel(e, module+"/gateway", "Server") || inGateway && ident(e, "Server")
	}

	// The names the file binds to a *gateway.Server: servers for variables
	// and parameters, fields for struct fields, returning for functions.
	servers, fields, returning := map[string]bool{}, map[string]bool{}, map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if fd, ok := n.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Type.Results != nil {
			for _, r := range fd.Type.Results.List {
				if isServerType(r.Type) {
					returning[fd.Name.Name] = true
				}
			}
		}
		return true
	})
	returnsServer := func(e ast.Expr) bool {
		call, ok := e.(*ast.CallExpr)
		if !ok {
			return false
		}
		if id, ok := call.Fun.(*ast.Ident); ok && returning[id.Name] {
			return true
		}
		return newServer(call.Fun) == "gateway.NewServer" || pkgSel(call.Fun, module+"/gateway/internal/gatewaytest", "Start")
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok && returnsServer(n.Rhs[i]) {
						servers[id.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if n.Type != nil && isServerType(n.Type) || i < len(n.Values) && returnsServer(n.Values[i]) {
					servers[id.Name] = true
				}
			}
		case *ast.StructType:
			for _, fl := range n.Fields.List {
				if isServerType(fl.Type) {
					for _, id := range fl.Names {
						fields[id.Name] = true
					}
				}
			}
		case *ast.FuncType:
			for _, list := range []*ast.FieldList{n.Params, n.Results} {
				if list == nil {
					continue
				}
				for _, fl := range list.List {
					if isServerType(fl.Type) {
						for _, id := range fl.Names {
							servers[id.Name] = true
						}
					}
				}
			}
		}
		return true
	})

	var out []string
	report := func(pos token.Pos, what string) {
		p := fset.Position(pos)
		out = append(out, fmt.Sprintf("%s:%d: %s", rel, p.Line, what))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch {
		case pkgSel(call.Fun, "net", "Listen", "ListenTCP"):
			report(call.Pos(), "calls net."+call.Fun.(*ast.SelectorExpr).Sel.Name)
		case newServer(call.Fun) != "":
			report(call.Pos(), "calls "+newServer(call.Fun))
		case ident(call.Fun, "newPublicServer"):
			report(call.Pos(), "calls newPublicServer")
		default:
			s, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || s.Sel.Name != "Start" || len(call.Args) != 0 {
				return true
			}
			switch x := s.X.(type) {
			case *ast.Ident:
				if servers[x.Name] {
					report(call.Pos(), "starts a gateway Server ("+x.Name+".Start())")
				}
			case *ast.SelectorExpr:
				if fields[x.Sel.Name] {
					report(call.Pos(), "starts a gateway Server (."+x.Sel.Name+".Start())")
				}
			}
		}
		return true
	})
	return out
}

// TestCheckKit runs checkKit on a small module: it reports each call only
// the kit may make outside kit and pending, by file and line, and nothing
// for a file in the kit, in testdata, in another module (but gateway/'s) or
// not a test; a
// clean file in pending; and a kit path that is missing, gatewayKit only
// once pending lists no gateway file.
func TestCheckKit(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	listen := "package p\n\nimport \"net\"\n\nfunc f() { net.Listen(\"tcp\", \"127.0.0.1:0\") }\n"
	write("go.mod", "module "+module+"\n")
	write("kitpkg/a_test.go", listen)
	write("testdata/a_test.go", listen)
	write("other/testdata/a_test.go", listen)
	write("nested/go.mod", "module example.com/nested\n")
	write("nested/a_test.go", listen)
	write("gateway/go.mod", "module "+module+"/gateway\n")
	write("other/plain.go", listen)
	write(".hidden/a_test.go", listen)
	write("gateway/pending_test.go", `package gateway

func f() {
	srv := NewServer(nil, nil)
	srv.Start()
}
`)
	write("gateway/clean_test.go", "package gateway\n")
	write("gateway/ext_test.go", `package gateway_test

import "github.com/sluice-gw/sluice/gateway"

func f() {
	NewServer()
	srv := gateway.NewServer(nil, nil)
	srv.Start()
}
`)
	write("gateway/fastengine/a_test.go", `package fastengine

func f() {
	newPublicServer(nil)
	NewServer(nil)
}
`)
	write("other/b_test.go", `package other

import (
	"net/http/httptest"
	stdnet "net"

	gw "github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/fastengine"
	"github.com/sluice-gw/sluice/gateway/internal/gatewaytest"
)

type inst struct{ srv *gw.Server }

func start() *gw.Server { return nil }

func f(in *inst, net fake, p *gw.Server) {
	stdnet.Listen("tcp", "127.0.0.1:0")
	stdnet.ListenTCP("tcp", nil)
	net.Listen("x")
	gw.NewServer(nil, nil)
	fastengine.NewServer(nil, nil)
	s := start()
	s.Start()
	in.srv.Start()
	g := gatewaytest.Start(nil, nil)
	g.Start()
	p.Start()
	var v *gw.Server
	v.Start()
	up := httptest.NewUnstartedServer(nil)
	up.Start()
	NewServer()
	newPublicServer()
}
`)
	kit := []string{"kitpkg", "missing", gatewayKit}
	pending := map[string]bool{"gateway/pending_test.go": true, "gateway/clean_test.go": true}
	got, err := checkKit(root, kit, pending)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kit lists missing: ",
		"gateway/ext_test.go:7: calls gateway.NewServer;",
		"gateway/ext_test.go:8: starts a gateway Server (srv.Start());",
		"gateway/fastengine/a_test.go:4: calls newPublicServer;",
		"gateway/fastengine/a_test.go:5: calls fastengine.NewServer;",
		"other/b_test.go:17: calls net.Listen;",
		"other/b_test.go:18: calls net.ListenTCP;",
		"other/b_test.go:20: calls gateway.NewServer;",
		"other/b_test.go:21: calls fastengine.NewServer;",
		"other/b_test.go:23: starts a gateway Server (s.Start());",
		"other/b_test.go:24: starts a gateway Server (.srv.Start());",
		"other/b_test.go:26: starts a gateway Server (g.Start());",
		"other/b_test.go:27: starts a gateway Server (p.Start());",
		"other/b_test.go:29: starts a gateway Server (v.Start());",
		"other/b_test.go:33: calls newPublicServer;",
		"pending lists gateway/clean_test.go, which no longer",
	}
	match := func(got, want []string) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if !strings.HasPrefix(got[i], want[i]) {
				return false
			}
		}
		return true
	}
	if !match(got, want) {
		t.Errorf("checkKit reports\n%s\nwant (prefixes)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// With no gateway file pending, the gateway's own kit must exist.
	got, err = checkKit(root, []string{"kitpkg", gatewayKit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !strings.HasPrefix(got[0], "kit lists "+gatewayKit+": ") {
		t.Errorf("with nothing pending, checkKit reports %q; want first the missing %s", got, gatewayKit)
	}
}
