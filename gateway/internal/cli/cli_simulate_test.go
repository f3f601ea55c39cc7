package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSimulateCommand runs `sluice simulate --compare` on the boundary
// pattern: the fixed window admits 2L within one
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

// TestSimulateHold: `sluice simulate` with a concurrency policy and --hold
// shows the in-flight limit at work: requests held 2s at 10/s against a
// limit of 5 are admitted five at a time, never more than five at once.
func TestSimulateHold(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"simulate", "--policy", "concurrency:limit=5,lease_ttl=10s", "--rps", "10", "--hold", "2s", "--duration", "4s"},
		Env{Stdout: &out, Stderr: &errb})
	if code != 0 {
		t.Fatalf("simulate exit %d, stderr:\n%s", code, errb.String())
	}
	text := out.String()
	for _, want := range []string{"each in flight for 2s", "max in flight"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	var admitted, most []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 5 && strings.HasSuffix(f[0], "s") && f[1] == "10":
			admitted = append(admitted, f[2])
		case len(f) == 3 && f[1] == "5":
			most = append(most, f[2])
		}
	}
	if got := strings.Join(admitted, ","); got != "5,0,5,0" {
		t.Errorf("admitted per second = %s, want 5,0,5,0\n%s", got, text)
	}
	if len(most) != 1 || most[0] != "5" {
		t.Errorf("max in flight = %v, want 5\n%s", most, text)
	}
}
