package layout

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sluice-gw/sluice"

// gatewayModule is the gateway module's path: the packages under gateway/
// are its own, every other package in the table is the library's (module).
const gatewayModule = module + "/gateway"

// allowed maps each package (relative to the repository's root, whose
// import path is module) to the repository's packages and third-party module
// prefixes it may import. It is the table of
// docs/layout.md ("What may import what"); TestLayoutDoc keeps the two the
// same, so change both together.
var allowed = map[string][]string{
	"ratelimit":                 {"ratelimit/internal/params"},
	"ratelimit/internal/params": {},
	"ratelimit/kit":             {"ratelimit", "ratelimit/internal/params"},
	"ratelimit/ratelimittest":   {"ratelimit", "ratelimit/kit", "pgregory.net/rapid"},
	"store/memory":              {"ratelimit", "ratelimit/kit"},
	"store/redis":               {"ratelimit", "ratelimit/kit", "github.com/redis/rueidis"},
	"store/fallback":            {"ratelimit", "ratelimit/kit", "github.com/sony/gobreaker"},
	"store/localdeny":           {"ratelimit", "ratelimit/kit"},
	"httplimit":                 {"ratelimit"},
	"gateway/metrics":           {"ratelimit", "github.com/prometheus/"},
	// The registry of configuration key sources: httplimit's and those
	// built on httplimit.FuncKeyPart (cookies).
	"gateway/keysource": {"httplimit"},
	"gateway/config":    {"ratelimit", "httplimit", "gateway/keysource", "github.com/goccy/go-yaml"},
	// gateway composes a configuration's parts (store, core, engine,
	// admin, rls) and runs the listeners; it imports no engine library.
	"gateway": {"ratelimit", "store/memory", "store/redis", "store/fallback", "store/localdeny", "httplimit", "gateway/metrics", "gateway/config",
		"gateway/admin", "gateway/core", "gateway/fastengine", "gateway/httpengine", "gateway/internal/connlimit", "gateway/internal/tlsconf", "gateway/rls",
		"gateway/internal/tracing", "gateway/internal/healthcheck", "github.com/prometheus/"},
	// The decision core: engine-neutral (TestCoreImports).
	"gateway/core": {"ratelimit", "store/fallback", "httplimit", "gateway/metrics", "gateway/config", "gateway/admin",
		"gateway/internal/panichook", "gateway/internal/tracing"},
	// The fasthttp engine: the one package that imports fasthttp.
	"gateway/fastengine": {"httplimit", "gateway/metrics", "gateway/config", "gateway/core", "gateway/internal/panichook",
		"gateway/internal/tracing", "gateway/internal/connlimit", "gateway/internal/upconn", "github.com/valyala/fasthttp"},
	// The net/http engine: HTTPS (HTTP/1.1 and HTTP/2) and h2c.
	"gateway/httpengine": {"httplimit", "gateway/metrics", "gateway/config", "gateway/core", "gateway/internal/panichook",
		"gateway/internal/connlimit", "gateway/internal/upconn"},
	// The public listeners' connection bounds, shared by the engines.
	"gateway/internal/connlimit": {"httplimit", "gateway/metrics", "gateway/config"},
	// The engines' connections to upstream targets: whether a request
	// reached its target (the pools' retry rule).
	"gateway/internal/upconn": {},
	// The active health checks of upstream pools' targets.
	"gateway/internal/healthcheck": {"gateway/config", "gateway/core"},
	// The panic tests' hook into the request path.
	"gateway/internal/panichook": {},
	// Envoy's rate limit service: the one package with gRPC and Envoy's
	// API types (and the protobuf runtime they are built on).
	"gateway/rls": {"ratelimit", "httplimit", "gateway/config", "google.golang.org/grpc", "github.com/envoyproxy/go-control-plane/envoy",
		"google.golang.org/protobuf"},
	// OpenTelemetry tracing of the public listener: the one package that
	// imports it.
	"gateway/internal/tracing": {"go.opentelemetry.io/"},
	"gateway/admin":            {"ratelimit", "store/memory", "httplimit"},
	"gateway/internal/cli":     {"gateway", "gateway/config", "gateway/config/scgimport", "ratelimit", "store/memory", "gateway/simulate", "gateway/internal/watch"},
	// sluice import scg: Spring Boot files (YAML with positions, .properties) to a sluice config.
	"gateway/config/scgimport": {"httplimit", "github.com/goccy/go-yaml"},
	// reload.watch: the one package that imports fsnotify.
	"gateway/internal/watch": {"github.com/fsnotify/fsnotify"},
	// The HTTPS listener's certificate store: server.tls's files, loaded
	// and watched.
	"gateway/internal/tlsconf": {"gateway/config", "gateway/internal/watch"},
	// The in-process CLI for programs outside the gateway module (bench).
	"gateway/command":    {"gateway/internal/cli"},
	"gateway/cmd/sluice": {"gateway/internal/cli"},
	"gateway/simulate":   {"ratelimit", "ratelimit/kit", "store/memory", "gonum.org/v1/plot"},
	"internal/redistest": {},
	// Builds and runs the sluice binary (tests and benchmarks only).
	"internal/sluicetest": {},
	// The load-and-fault harness (tests and bench/cmd/faultbench only).
	"internal/faultload": {"internal/redistest", "internal/sluicetest"},
	"internal/layout":    {},
	// Self-signed TLS certificates for tests.
	"internal/testcert": {},
	// Value comparison for the library's tests, on the standard library.
	"internal/testdiff": {},
	// Loopback listeners and the servers tests run on them.
	"internal/testkit": {},
	// Gateways built and started for tests outside package gateway.
	"gateway/internal/gatewaytest": {"gateway", "gateway/config"},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
	Module     struct{ Path string }
}

// listPackages returns the packages of the library and gateway modules
// (the bench module's are left out: its tools and tests may import
// anything), as `go list -json` in the workspace (go.work) reports them.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Module.Path == module || p.Module.Path == gatewayModule {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

// wantModule is the module a package of the table (relative path rel)
// belongs to: the gateway module for gateway and below it, else the library.
func wantModule(rel string) string {
	if rel == "gateway" || strings.HasPrefix(rel, "gateway/") {
		return gatewayModule
	}
	return module
}

// TestImportEdges checks every package of the table against its row, and
// that each is in the module its path says (docs/layout.md, "Modules").
func TestImportEdges(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		seen[rel] = true
		rules, ok := allowed[rel]
		if !ok {
			// Packages outside the table (examples, bench tools) may
			// import anything but must not be imported by the library.
			continue
		}
		if want := wantModule(rel); p.Module.Path != want {
			t.Errorf("%s is in module %s; want %s", rel, p.Module.Path, want)
		}
		for _, imp := range p.Imports {
			if isStd(imp) || imp == p.ImportPath {
				continue
			}
			if !permitted(imp, rules) {
				t.Errorf("%s imports %s, which the layout table (docs/layout.md) does not allow", rel, imp)
			}
		}
	}
	for rel := range allowed {
		if !seen[rel] {
			t.Errorf("package %s of the layout table is missing", rel)
		}
	}
}

// TestLayoutDoc checks that docs/layout.md's import table has the rows of
// allowed, no more and no fewer, each with the same imports.
func TestLayoutDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- layout-table: begin")
	table, _, ok2 := strings.Cut(rest, "<!-- layout-table: end")
	if !ok || !ok2 {
		t.Fatal("docs/layout.md has no layout-table markers")
	}
	doc := map[string][]string{}
	for line := range strings.SplitSeq(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		var imps []string
		for imp := range strings.SplitSeq(cells[2], ",") {
			if imp = strings.Trim(strings.TrimSpace(imp), "`"); imp != "" {
				imps = append(imps, imp)
			}
		}
		if _, dup := doc[name]; dup {
			t.Errorf("docs/layout.md lists %s twice", name)
		}
		doc[name] = imps
	}
	for name, imps := range allowed {
		got, ok := doc[name]
		if !ok {
			t.Errorf("docs/layout.md has no row for %s (the test's table allows %v)", name, imps)
			continue
		}
		if !slices.Equal(sorted(got), sorted(imps)) {
			t.Errorf("docs/layout.md's row for %s allows %v; the test's table allows %v", name, got, imps)
		}
	}
	for name := range doc {
		if _, ok := allowed[name]; !ok {
			t.Errorf("docs/layout.md has a row for %s, which the test's table lacks", name)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func permitted(imp string, rules []string) bool {
	for _, r := range rules {
		if strings.Contains(r, ".") { // third-party module prefix
			if strings.HasPrefix(imp, r) {
				return true
			}
			continue
		}
		if imp == module+"/"+r {
			return true
		}
	}
	return false
}

func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

func TestGofmt(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("gofmt", "-l", root).CombinedOutput()
	if err != nil {
		t.Fatalf("gofmt: %v\n%s", err, out)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("gofmt would change:\n%s", s)
	}
}

// engineLibraries are the libraries only some engine packages may import,
// each with the packages that may (none: tests only).
var engineLibraries = map[string][]string{
	"github.com/valyala/fasthttp": {"gateway/fastengine"},
	// HTTP/2 is served by net/http's own; x/net/http2's framer is for the
	// hostile HTTP/2 tests.
	"golang.org/x/net/http2": nil,
}

// engines are the engine packages: each reads the wire into the core's
// view and writes the core's answer back (docs/layout.md, "Listeners and
// engines").
var engines = []string{"gateway/fastengine", "gateway/httpengine"}

// TestOneEngine checks that only the engine packages engineLibraries names
// import an engine library, in the files that build the package (tests
// may drive the engine's library directly).
func TestOneEngine(t *testing.T) {
	importers := map[string][]string{}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for _, imp := range p.Imports {
			for lib := range engineLibraries {
				if strings.HasPrefix(imp, lib) {
					importers[lib] = append(importers[lib], rel)
				}
			}
		}
	}
	for lib, want := range engineLibraries {
		got := slices.Compact(sorted(importers[lib]))
		if !slices.Equal(got, sorted(want)) {
			t.Errorf("%s is imported by %v; only %v may import it", lib, got, want)
		}
		for _, p := range want {
			if !slices.Contains(engines, p) {
				t.Errorf("%s may import %s but is not an engine", p, lib)
			}
		}
	}
}

// httpServers are the packages whose non-test code may build an
// http.Server, each with what it serves: the public listeners are the
// engines', and no other package starts one.
var httpServers = map[string]string{
	"gateway/httpengine":  "the public HTTPS and h2c listeners",
	"gateway":             "the admin listener",
	"examples/middleware": "the library example's own server",
	"internal/faultload":  "the fault harness's test upstream",
}

// TestHTTPServers checks, with go/ast, that only the packages httpServers
// names build an http.Server (a composite literal of net/http's Server
// type) outside their tests.
func TestHTTPServers(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "bench" || strings.HasPrefix(n, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		httpName := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"net/http"` {
				httpName = "http"
				if imp.Name != nil {
					httpName = imp.Name.Name
				}
			}
		}
		if httpName == "" {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if sel, ok := cl.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Server" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == httpName {
					found[rel] = true
					if _, ok := httpServers[rel]; !ok {
						t.Errorf("%s builds an http.Server; only %v may (the public listeners are the engines')", fset.Position(cl.Pos()), slices.Sorted(maps.Keys(httpServers)))
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, what := range httpServers {
		if !found[p] {
			t.Errorf("%s is listed as building an http.Server (%s) but builds none", p, what)
		}
	}
}

// coreImports is the decision core's import list: it reads requests
// through its own view and answers with a value, so it imports neither
// net, net/http nor an engine.
var coreImports = []string{
	"context", "crypto/sha256", "crypto/x509", "encoding/hex", "errors", "fmt", "hash/maphash", "log/slog", "maps", "math",
	"math/rand/v2", "net/netip", "net/textproto", "net/url", "runtime", "runtime/debug", "slices", "strconv",
	"strings", "sync", "sync/atomic", "time", "unicode/utf8",
	module + "/gateway/admin", module + "/gateway/config", module + "/gateway/internal/panichook",
	module + "/gateway/internal/tracing", module + "/gateway/metrics", module + "/httplimit", module + "/ratelimit",
	module + "/store/fallback",
}

// TestCoreImports checks the decision core's imports: exactly coreImports,
// and none of net, net/http or an engine library, whatever coreImports
// says.
func TestCoreImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", module+"/gateway/core").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	got := strings.Fields(string(out))
	for _, imp := range got {
		if imp == "net" || imp == "net/http" || strings.HasPrefix(imp, "net/http/") {
			t.Errorf("gateway/core imports %s; the core reads requests through core.Request and answers with core.Outcome", imp)
		}
		for lib := range engineLibraries {
			if strings.HasPrefix(imp, lib) {
				t.Errorf("gateway/core imports the engine library %s", imp)
			}
		}
	}
	if !slices.Equal(got, sorted(coreImports)) {
		t.Errorf("gateway/core imports\n%v\nwant\n%v\n(update coreImports when a change is deliberate)", got, sorted(coreImports))
	}
}

// maxGatewayMethods bounds the methods declared on *gateway.Gateway: the
// type keeps composition (construction, store wiring, reload sharing) and
// the route table; deciding and serving requests belong to the core and
// the engines (docs/layout.md).
const maxGatewayMethods = 15

// TestGatewayTypeSmall counts the methods declared on gateway.Gateway in
// the gateway package's non-test files.
func TestGatewayTypeSmall(t *testing.T) {
	dir := filepath.Join("..", "..", "gateway")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var methods []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			typ := fd.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok && id.Name == "Gateway" {
				methods = append(methods, fd.Name.Name)
			}
		}
	}
	if len(methods) == 0 {
		t.Fatal("no method declared on gateway.Gateway: the test reads the wrong directory")
	}
	if len(methods) > maxGatewayMethods {
		t.Errorf("gateway.Gateway declares %d methods, more than %d: %v", len(methods), maxGatewayMethods, sorted(methods))
	}
	t.Logf("gateway.Gateway declares %d methods: %v", len(methods), sorted(methods))
}
