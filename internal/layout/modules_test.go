package layout

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// maxUserModules bounds the modules other than the user's own and the
// library that a module importing ratelimit, httplimit and store/memory
// gets in `go list -m all`. Module graph pruning lists every requirement of
// the library's go.mod there, so that go.mod must stay lean: each line
// added to it reaches every library user.
const maxUserModules = 5

// otherModules are path prefixes of modules that only the gateway module
// (gateway/go.mod) or the bench module (bench/go.mod) may require.
var otherModules = []string{
	// The gateway's: gRPC and Envoy's API (rls), OpenTelemetry, the
	// fasthttp engine, Prometheus, the YAML decoder, fsnotify, the charts.
	"google.golang.org/grpc",
	"google.golang.org/protobuf",
	"github.com/envoyproxy/",
	"go.opentelemetry.io/",
	"github.com/valyala/",
	"github.com/prometheus/",
	"github.com/goccy/go-yaml",
	"github.com/fsnotify/",
	"gonum.org/",
	// The bench module's: benchmarks, browser tests, other limiters.
	"github.com/chromedp/",
	"github.com/tsenart/vegeta",
	"github.com/go-redis/redis_rate",
	"github.com/ulule/limiter",
	"github.com/redis/go-redis",
	"golang.org/x/time",
}

// TestUserModuleGraph builds a throwaway module that imports the packages
// a library user starts with (ratelimit, httplimit, store/memory) and
// requires the library (replaced by this checkout: only released go.mod
// files must do without replace), outside the workspace, and checks its
// `go list -m all`: the user's module, the library's and at most
// maxUserModules others, none of them a gateway or bench module and each
// one used by the library's packages or tests. The module builds.
func TestUserModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command on a throwaway module")
	}
	root := repoRoot(t)
	goLine := modFile(t, root).Go
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/user\n\ngo "+goLine+"\n\nrequire "+module+" v0.0.0-00010101000000-000000000000\n\nreplace "+module+" => "+root+"\n")
	write("main.go", `package main

import (
	_ "`+module+`/httplimit"
	_ "`+module+`/ratelimit"
	_ "`+module+`/store/memory"
)

func main() {}
`)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))

	got := goLines(t, dir, "list", "-m", "all")
	t.Logf("go list -m all in a module importing ratelimit, httplimit and store/memory (%d modules):\n%s",
		len(got), strings.Join(got, "\n"))
	used := goLines(t, root, "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")
	var others []string
	seen := map[string]bool{}
	for _, line := range got {
		path, _, _ := strings.Cut(line, " ")
		seen[path] = true
		if path == "example.com/user" || path == module {
			continue
		}
		others = append(others, line)
		for _, o := range otherModules {
			if strings.HasPrefix(path, o) {
				t.Errorf("%s is in a library user's module graph; it belongs in gateway/go.mod or bench/go.mod", path)
			}
		}
		if !slices.Contains(used, path) {
			t.Errorf("%s is in a library user's module graph, but no package of the library module or its tests uses it", path)
		}
	}
	for _, want := range []string{"example.com/user", module} {
		if !seen[want] {
			t.Errorf("go list -m all does not list %s", want)
		}
	}
	if len(others) > maxUserModules {
		t.Errorf("a library user's module graph has %d modules besides its own and the library's, want at most %d:\n%s",
			len(others), maxUserModules, strings.Join(others, "\n"))
	}
	goLines(t, dir, "build", "-o", os.DevNull, ".")
}

// TestGoDirective: the library's go line is the highest go line among its
// requirements (each read from its go.mod in the module cache), so that
// the library raises no user's go line further than its dependencies do.
// TestLibraryAtItsPins checks that the library's code needs no newer one.
func TestGoDirective(t *testing.T) {
	root := repoRoot(t)
	mod := modFile(t, root)
	if !regexp.MustCompile(`^1\.\d+(\.\d+)?$`).MatchString(mod.Go) {
		t.Fatalf("go.mod says go %s; want a release such as 1.25.0", mod.Go)
	}
	highest, from := "", ""
	for _, r := range mod.Require {
		cmd := exec.Command("go", "list", "-m", "-f", "{{.GoVersion}}", r.Path+"@"+r.Version)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			msg := fmt.Sprintf("reading the go line of %s@%s (from the module cache, else the module proxy): %v\n%s", r.Path, r.Version, err, out)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		v := strings.TrimSpace(string(out))
		t.Logf("%s %s: go %s", r.Path, r.Version, v)
		if highest == "" || compareGo(v, highest) > 0 {
			highest, from = v, r.Path+"@"+r.Version
		}
	}
	if highest == "" {
		t.Fatal("go.mod has no requirements to read a go line from")
	}
	if compareGo(mod.Go, highest) != 0 {
		t.Errorf("go.mod says go %s; the highest go line among its requirements is %s (%s)", mod.Go, highest, from)
	}
}

// TestLibraryAtItsPins vets the library module alone (outside the
// workspace, where the gateway's and bench's requirements raise the
// versions the library builds with): its packages and tests build at the
// versions its go.mod pins, and vet's stdversion check finds no standard
// library API newer than its go line.
func TestLibraryAtItsPins(t *testing.T) {
	if testing.Short() {
		t.Skip("vets the library module")
	}
	goLines(t, repoRoot(t), "vet", "./...")
}

// TestNoReplace: the go.mod files that are released (the library's and the
// gateway's) carry no replace directive; the workspace (go.work) joins the
// modules in a checkout.
func TestNoReplace(t *testing.T) {
	root := repoRoot(t)
	for _, dir := range []string{".", "gateway"} {
		if mod := modFile(t, filepath.Join(root, dir)); len(mod.Replace) > 0 {
			t.Errorf("%s has replace directives %v; released go.mod files must have none", filepath.Join(dir, "go.mod"), mod.Replace)
		}
	}
}

// TestWorkspace: go.work uses every module in the repository (every
// directory with a go.mod outside testdata), and no other directory.
func TestWorkspace(t *testing.T) {
	root := repoRoot(t)
	out := goLines(t, root, "work", "edit", "-json", filepath.Join(root, "go.work"))
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal([]byte(strings.Join(out, "\n")), &work); err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, u := range work.Use {
		used = append(used, filepath.ToSlash(filepath.Clean(u.DiskPath)))
	}
	mods := moduleDirs(t, root)
	if !slices.Equal(sorted(used), mods) {
		t.Errorf("go.work uses %v; the repository's modules are %v", sorted(used), mods)
	}
}

// moduleDirs returns the directories (relative to root, "." for root) that
// hold a go.mod, testdata and hidden directories left out, sorted.
func moduleDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" && !d.IsDir() {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sorted(dirs)
}

// modFile is the go.mod in dir, as `go mod edit -json` reads it.
type goMod struct {
	Go      string
	Require []struct{ Path, Version string }
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

func modFile(t *testing.T, dir string) goMod {
	t.Helper()
	out := goLines(t, dir, "mod", "edit", "-json")
	var mod goMod
	if err := json.Unmarshal([]byte(strings.Join(out, "\n")), &mod); err != nil {
		t.Fatal(err)
	}
	return mod
}

// compareGo compares two go lines (1.25, 1.25.0, 1.26.3) by release:
// 1.25 and 1.25.0 are equal.
func compareGo(a, b string) int {
	pa, pb := goParts(a), goParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func goParts(v string) [3]int {
	var p [3]int
	for i, s := range strings.SplitN(v, ".", 3) {
		fmt.Sscan(s, &p[i])
	}
	return p
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goLines runs the go command in dir on that directory's module alone
// (GOWORK=off) and returns its output lines.
func goLines(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// readmeTestCommand is the sh block under "## Running the tests" in
// README.md.
var readmeTestCommand = regexp.MustCompile("(?s)## Running the tests\n+```sh\n([^\n]+)\n```")

// TestCIRunsTheReadmeCommand: .ci/run ends with the README's test command,
// one command run at the root that vets and tests every module of the
// repository (go.work joins them): the root's ./... and ./DIR/... for each
// other module.
func TestCIRunsTheReadmeCommand(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := readmeTestCommand.FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no sh block under \"## Running the tests\"")
	}
	command := string(m[1])
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	if last := lines[len(lines)-1]; last != command {
		t.Errorf(".ci/run ends with\n\t%s\nwant the README's test command\n\t%s", last, command)
	}
	steps := strings.Split(command, " && ")
	if len(steps) != 2 || !strings.HasPrefix(steps[0], "go vet ") || !strings.HasPrefix(steps[1], "go test ") {
		t.Fatalf("the README's test command %q is not `go vet PATTERNS && go test FLAGS PATTERNS`", command)
	}
	for _, dir := range moduleDirs(t, root) {
		pattern := "./" + dir + "/..."
		if dir == "." {
			pattern = "./..."
		}
		for _, step := range steps {
			if !slices.Contains(strings.Fields(step), pattern) {
				t.Errorf("%q does not cover the module in %s/ (%s)", step, dir, pattern)
			}
		}
	}
}

// readmeGoCommand finds the package argument of a `go run` or `go build`
// command line in README.md, and the file after --config.
var (
	readmeGoCommand = regexp.MustCompile(`(?m)^go (?:run|build)(?: -o \S+)? (\./\S+)(?:.*--config (\S+))?`)
	readmeGoInstall = regexp.MustCompile(`go install (` + regexp.QuoteMeta(module) + `/\S+)@`)
)

// TestReadmeGoCommands: each `go run` and `go build` line in README.md,
// run at the repository's root as the README says, names a main package of
// the workspace and an existing config file, and each `go install` names a
// main package of the repository, so the quickstart works verbatim from a
// clean clone.
func TestReadmeGoCommands(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	runs := readmeGoCommand.FindAllStringSubmatch(string(readme), -1)
	installs := readmeGoInstall.FindAllStringSubmatch(string(readme), -1)
	if len(runs) == 0 || len(installs) == 0 {
		t.Fatalf("README.md has %d go run/build lines and %d go install commands; want the quickstart's and the install's", len(runs), len(installs))
	}
	var pkgs []string
	for _, m := range runs {
		pkgs = append(pkgs, m[1])
		if m[2] != "" {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[2]))); err != nil {
				t.Errorf("README.md: %s: %v", m[0], err)
			}
		}
	}
	for _, m := range installs {
		pkgs = append(pkgs, m[1])
	}
	for _, p := range pkgs {
		// In the workspace (go.work), as a reader at the root runs it.
		cmd := exec.Command("go", "list", "-f", "{{.Name}}", p)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "main" {
			t.Errorf("README.md names %s, which is not a main package at the repository's root: %v\n%s", p, err, out)
		}
	}
}
