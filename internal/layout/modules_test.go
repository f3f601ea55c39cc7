package layout

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// benchOnly are modules that only the bench module (benchmarks, browser
// tests, comparisons with other limiters) may require.
var benchOnly = []string{
	"github.com/chromedp/",
	"github.com/tsenart/vegeta",
	"github.com/go-redis/redis_rate",
	"github.com/ulule/limiter",
	"github.com/redis/go-redis",
	"golang.org/x/time",
}

// TestUserModuleGraph builds a throwaway module that imports only the
// std-only packages a library user starts with (ratelimit, httplimit,
// store/memory) and checks its `go list -m all`: no benchmark or browser
// module, and nothing the root module's own packages and tests do not use.
// Module graph pruning still lists every requirement of sluice's go.mod, so
// that go.mod must stay lean.
// tagOnly are modules that a dependency's go.mod requires for files built
// only under a build tag, so that no package uses them in a normal build:
// go-control-plane/envoy's *_vtproto.pb.go files (tag vtprotobuf) need
// vtprotobuf.
var tagOnly = []string{"github.com/planetscale/vtprotobuf"}

func TestUserModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command on a throwaway module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/user\n\ngo 1.26\n\nrequire "+module+" v0.0.0\n\nreplace "+module+" => "+root+"\n")
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
	for _, line := range got {
		path, _, _ := strings.Cut(line, " ")
		if path == "example.com/user" || path == module {
			continue
		}
		for _, b := range benchOnly {
			if strings.HasPrefix(path, b) {
				t.Errorf("%s is in a library user's module graph; it belongs in bench/go.mod", path)
			}
		}
		if !slices.Contains(used, path) && !slices.Contains(tagOnly, path) {
			t.Errorf("%s is in a library user's module graph, but no package of the root module or its tests uses it", path)
		}
	}
}

// TestGoDirective: the root module's go line names a release series (1.26
// or 1.26.0), never a patch release, which would raise every user's own go
// line to it.
func TestGoDirective(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := goLines(t, root, "mod", "edit", "-json")
	var mod struct{ Go string }
	if err := json.Unmarshal([]byte(strings.Join(out, "\n")), &mod); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^1\.\d+(\.0)?$`).MatchString(mod.Go) {
		t.Errorf("go.mod says go %s; want a release series such as 1.26 (or 1.26.0 when a dependency needs it)", mod.Go)
	}
}

// goLines runs the go command in dir and returns its output lines.
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

// TestCIRunsTheReadmeCommand: .ci/run ends with the README's test command,
// and that command tests every module in the repository.
func TestCIRunsTheReadmeCommand(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Running the tests\n+```sh\n([^\n]+)\n```").FindSubmatch(readme)
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
	if !strings.HasPrefix(command, "go vet ./... && go test ") {
		t.Errorf("the README's test command %q does not start in the root module", command)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" || filepath.Dir(path) == root {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		if !strings.Contains(command, "(cd "+filepath.ToSlash(rel)+" && go vet ./... && go test ") {
			t.Errorf("the README's test command does not test the module in %s/", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
