package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSimulateCommand runs `sluice simulate --compare` on the boundary
// pattern, issue 7's "done when": the fixed window admits 2L within one
// window, the sliding log never more than L.
func TestSimulateCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"simulate", "--compare", "--limit", "10", "--window", "1s", "--pattern", "boundary", "--table=false"},
		Env{Stdout: &out, Stderr: &errb})
	if code != 0 {
		t.Fatalf("simulate exit %d, stderr:\n%s", code, errb.String())
	}
	text := out.String()
	// summary rows: policy limit W admitted denied max/W ...
	maxW := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "10" && f[2] == "1s" {
			maxW[f[0]] = f[5]
		}
	}
	if got := maxW["fixed_window"]; got != "20" {
		t.Errorf("fixed_window max admitted in one window = %q, want 20 (2L)\n%s", got, text)
	}
	if got := maxW["sliding_log"]; got != "10" {
		t.Errorf("sliding_log max admitted in one window = %q, want 10 (L)\n%s", got, text)
	}
}
