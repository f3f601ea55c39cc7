package simulate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "regenerate the charts and outputs of docs/algorithms.md")

// docsDir is the repository's docs directory.
const docsDir = "../docs"

// TestDocs fails when a chart or a simulation output in docs/algorithms.md
// is not what the code produces now. Regenerate them with
//
//	go test ./simulate -run TestDocs -update-docs
func TestDocs(t *testing.T) {
	if *updateDocs {
		if err := UpdateDocs(docsDir); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckDocs(docsDir); err != nil {
		t.Fatalf("%v\nregenerate with: go test ./simulate -run TestDocs -update-docs", err)
	}
	page, err := os.ReadFile(filepath.Join(docsDir, DocsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range docEntries {
		if e.chart && !strings.Contains(string(page), "](img/"+e.name+".svg)") {
			t.Errorf("%s does not show img/%s.svg", DocsFile, e.name)
		}
	}
	if !strings.Contains(string(page), "go test ./simulate -run TestDocs -update-docs") {
		t.Errorf("%s does not document the command that regenerates it", DocsFile)
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
	write(DocsFile, page.String())
	entries := docEntries[:1]
	err := checkEntries(dir, entries)
	if err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("CheckDocs on an old page = %v, want stale blocks and chart", err)
	}
	if err := updateEntries(dir, entries); err != nil {
		t.Fatal(err)
	}
	if err := checkEntries(dir, entries); err != nil {
		t.Fatalf("CheckDocs right after UpdateDocs: %v", err)
	}
	write("img/"+entries[0].name+".svg", "<svg/>")
	if err := checkEntries(dir, entries); err == nil || !strings.Contains(err.Error(), "img/"+entries[0].name+".svg") {
		t.Errorf("CheckDocs with a changed chart = %v, want it reported", err)
	}
	write(DocsFile, "# page without blocks\n")
	if err := checkEntries(dir, entries); err == nil || !strings.Contains(err.Error(), "no block") {
		t.Errorf("CheckDocs on a page without the block = %v, want it reported", err)
	}
}

// TestMainDocs: `sluice simulate --docs DIR` rewrites the page's blocks and
// charts, and reports a page without them.
func TestMainDocs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := os.WriteFile(filepath.Join(dir, DocsFile), []byte("# no blocks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := Main([]string{"--docs", dir}, &stdout, &stderr); code != ExitError || !strings.Contains(stderr.String(), "no block") {
		t.Errorf("Main(--docs) on a page without blocks = %d, %q; want %d and a missing block", code, stderr.String(), ExitError)
	}
	if code := Main([]string{"--docs", filepath.Join(dir, "nope")}, &stdout, &stderr); code != ExitError {
		t.Errorf("Main(--docs) on a missing directory = %d, want %d", code, ExitError)
	}
}
