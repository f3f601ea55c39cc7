package layout

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/sluice-gw/sluice"

// allowed maps each package (relative to the module) to the module-internal
// packages and third-party module prefixes it may import. It is STYLE.md's
// layout table; change both together.
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
	"metrics":                   {"ratelimit", "github.com/prometheus/"},
	"config":                    {"ratelimit", "httplimit", "github.com/goccy/go-yaml"},
	// gateway serves its public listener on fasthttp; httplimit, which
	// library users import, stays on net/http alone.
	"gateway": {"ratelimit", "store/memory", "store/redis", "store/fallback", "store/localdeny", "httplimit", "metrics", "config",
		"gateway/admin", "rls", "internal/tracing", "github.com/prometheus/", "github.com/valyala/fasthttp"},
	// Envoy's rate limit service: the one package with gRPC and Envoy's
	// API types (and the protobuf runtime they are built on).
	"rls": {"ratelimit", "httplimit", "config", "google.golang.org/grpc", "github.com/envoyproxy/go-control-plane/envoy",
		"google.golang.org/protobuf"},
	// OpenTelemetry tracing of the public listener: the one package that
	// imports it.
	"internal/tracing": {"go.opentelemetry.io/"},
	"gateway/admin":    {"ratelimit", "store/memory", "httplimit"},
	"internal/cli":     {"gateway", "config", "config/scgimport", "ratelimit", "store/memory", "simulate", "internal/watch"},
	// sluice import scg: Spring Boot files (YAML with positions, .properties) to a sluice config.
	"config/scgimport": {"httplimit", "github.com/goccy/go-yaml"},
	// reload.watch: the one package that imports fsnotify.
	"internal/watch":     {"github.com/fsnotify/fsnotify"},
	"cmd/sluice":         {"internal/cli"},
	"simulate":           {"ratelimit", "ratelimit/kit", "store/memory", "gonum.org/v1/plot"},
	"internal/redistest": {},
	// Builds and runs the sluice binary (tests and benchmarks only).
	"internal/sluicetest": {},
	// The load-and-fault harness (tests and bench/cmd/faultbench only).
	"internal/faultload": {"internal/redistest", "internal/sluicetest"},
	"internal/layout":    {},
	// Self-signed TLS certificates for tests.
	"internal/testcert": {},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func TestImportEdges(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := map[string]bool{}
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		seen[rel] = true
		rules, ok := allowed[rel]
		if !ok {
			// Packages outside the table (examples, bench tools) may
			// import anything but must not be imported by the library.
			continue
		}
		for _, imp := range p.Imports {
			if isStd(imp) || imp == p.ImportPath {
				continue
			}
			if !permitted(imp, rules) {
				t.Errorf("%s imports %s, which STYLE.md's layout table does not allow", rel, imp)
			}
		}
	}
	for _, core := range []string{"ratelimit", "store/memory"} {
		if !seen[core] {
			t.Errorf("package %s is missing", core)
		}
	}
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
