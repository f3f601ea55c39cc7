package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var regenerateDocs = flag.Bool("update-docs", false, "regenerate the charts and outputs of docs/algorithms.md")

// docsDir is the repository's docs directory.
const docsDir = "../../../docs"

// TestDocs fails when a chart or a simulation output in docs/algorithms.md
// is not what the code produces now. Regenerate them with
//
//	go test ./gateway/internal/cli -run TestDocs -update-docs
func TestDocs(t *testing.T) {
	if *regenerateDocs {
		if err := updateDocs(docsDir); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkDocs(docsDir); err != nil {
		t.Fatalf("%v\nregenerate with: go test ./gateway/internal/cli -run TestDocs -update-docs", err)
	}
	page, err := os.ReadFile(filepath.Join(docsDir, docsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range docEntries {
		if e.chart && !strings.Contains(string(page), "](img/"+e.name+".svg)") {
			t.Errorf("%s does not show img/%s.svg", docsFile, e.name)
		}
	}
	if !strings.Contains(string(page), "go test ./gateway/internal/cli -run TestDocs -update-docs") {
		t.Errorf("%s does not document the command that regenerates it", docsFile)
	}
}

// TestCheckDocsDetectsStale: a changed chart, a changed output and a missing
// block are each reported.
func TestCheckDocsDetectsStale(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var page strings.Builder
	for _, e := range docEntries[:1] {
		open, end := docMarkers(e.name)
		page.WriteString("# page\n" + open + "old\n" + end + "\n")
	}
	write := func(name, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(docsFile, page.String())
	entries := docEntries[:1]
	err := checkEntries(dir, entries)
	if err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("checkDocs on an old page = %v, want stale blocks and chart", err)
	}
	if err := updateEntries(dir, entries); err != nil {
		t.Fatal(err)
	}
	if err := checkEntries(dir, entries); err != nil {
		t.Fatalf("checkDocs right after updateDocs: %v", err)
	}
	write("img/"+entries[0].name+".svg", "<svg/>")
	if err := checkEntries(dir, entries); err == nil || !strings.Contains(err.Error(), "img/"+entries[0].name+".svg") {
		t.Errorf("checkDocs with a changed chart = %v, want it reported", err)
	}
	write(docsFile, "# page without blocks\n")
	if err := checkEntries(dir, entries); err == nil || !strings.Contains(err.Error(), "no block") {
		t.Errorf("checkDocs on a page without the block = %v, want it reported", err)
	}
}

// TestSimulateDocsFlag: `sluice simulate --docs DIR` rewrites the page's blocks and
// charts, and reports a page without them.
func TestSimulateDocsFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := os.WriteFile(filepath.Join(dir, docsFile), []byte("# no blocks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := runSimulate([]string{"--docs", dir}, Env{Stdout: &stdout, Stderr: &stderr}); code != exitError || !strings.Contains(stderr.String(), "no block") {
		t.Errorf("runSimulate(--docs) on a page without blocks = %d, %q; want %d and a missing block", code, stderr.String(), exitError)
	}
	if code := runSimulate([]string{"--docs", filepath.Join(dir, "nope")}, Env{Stdout: &stdout, Stderr: &stderr}); code != exitError {
		t.Errorf("runSimulate(--docs) on a missing directory = %d, want %d", code, exitError)
	}
}
