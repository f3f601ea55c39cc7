package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// testEnv is the environment the golden tests see.
var testEnv = map[string]string{
	"SLUICE_ADMIN_TOKEN": "s3cret",
	"CAPACITY":           "20",
	"UPSTREAM_HOST":      "backend.internal",
	"SHADOW":             "true",
	"EMPTY":              "",
}

func testLookup(name string) (string, bool) {
	v, ok := testEnv[name]
	return v, ok
}

// checkOutput is what `sluice check` shows for a file: every error, one per
// line, or the summary line followed by the effective configuration.
// The file is parsed as testdata/check/NAME, so that the relative paths of
// server.tls resolve from there, and its errors are shown under NAME.
func checkOutput(t *testing.T, name string, data []byte) (string, bool) {
	t.Helper()
	c, err := Parse(filepath.Join("testdata/check", name), data, testLookup)
	if err != nil {
		var errs Errors
		if !errors.As(err, &errs) {
			t.Fatalf("Parse(%s) error is %T, want config.Errors: %v", name, err, err)
		}
		if len(errs) == 0 {
			t.Fatalf("Parse(%s) returned empty Errors", name)
		}
		for _, e := range errs {
			e.File = name
		}
		return err.Error() + "\n", false
	}
	return c.Summary(name) + "\n" + c.Effective(), true
}

// TestCheckGolden compares check's output for every testdata/check/*.yaml
// with the .golden file beside it. Files named *_ok.yaml must be valid; all
// others must be invalid. Run with -update to rewrite the golden files, then
// review the diff.
func TestCheckGolden(t *testing.T) {
	tlsFixtures(t)
	files, err := filepath.Glob("testdata/check/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	lineRE := regexp.MustCompile(`^[a-z_]+\.yaml:\d+:\d+: \S`)
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got, valid := checkOutput(t, name, data)
			if wantValid := strings.HasSuffix(name, "_ok.yaml"); valid != wantValid {
				t.Errorf("Parse(%s) valid = %v, want %v; output:\n%s", name, valid, wantValid, got)
			}
			if !valid {
				for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
					if !lineRE.MatchString(l) {
						t.Errorf("error line %q is not FILE:LINE:COL: message", l)
					}
				}
			}
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("check %s mismatch (-want +got):\n%s", name, diff)
			}
		})
	}
}
