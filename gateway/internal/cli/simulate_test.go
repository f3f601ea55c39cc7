package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSimulateGolden runs `sluice simulate` on each case of
// testdata/simulate/*.args and compares stdout, stderr and the exit code
// with testdata/simulate/NAME.golden. Regenerate with
// go test ./gateway/internal/cli -run TestSimulateGolden -update.
func TestSimulateGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/simulate/*.args")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("found %d golden cases, want at least 8", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".args")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Fields(string(raw))
			lookup := func(k string) (string, bool) {
				v, ok := map[string]string{"EXACT_LIMIT": "4"}[k]
				return v, ok
			}
			var stdout, stderr bytes.Buffer
			code := runSimulate(args, Env{Stdout: &stdout, Stderr: &stderr, LookupEnv: lookup})
			got := "$ sluice simulate " + strings.Join(args, " ") + "\n" +
				"exit " + strconv.Itoa(code) + "\n" +
				"-- stdout --\n" + stdout.String() + "-- stderr --\n" + stderr.String()
			golden := strings.TrimSuffix(f, ".args") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("sluice simulate %s: output differs from %s (-want +got):\n%s", strings.Join(args, " "), golden, diff)
			}
		})
	}
}

func TestSimulateExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want int
		msg  string
	}{
		{"no policy", []string{}, exitUsage, "no policy"},
		{"two ways", []string{"--compare", "--policy", "gcra:burst=1,rate=1"}, exitUsage, "one way only"},
		{"unknown flag", []string{"--frobnicate"}, exitUsage, "frobnicate"},
		{"stray argument", []string{"--compare", "extra"}, exitUsage, `unexpected argument "extra"`},
		{"help", []string{"-h"}, exitOK, ""},
		{"bad policy", []string{"--policy", "token_bucket:capacity=0,rate=1"}, exitUsage, "capacity must be at least 1"},
		{"bad field", []string{"--policy", "token_bucket:size=3"}, exitUsage, `unknown field "size"`},
		{"bad pattern", []string{"--compare", "--pattern", "zigzag"}, exitUsage, `unknown pattern "zigzag"`},
		{"trace without file", []string{"--compare", "--pattern", "trace"}, exitUsage, "--trace FILE"},
		{"missing trace", []string{"--compare", "--pattern", "trace", "--trace", "testdata/nope.csv"}, exitError, "nope.csv"},
		{"cost above limit", []string{"--compare", "--limit", "2", "--cost", "3"}, exitError, "cost 3 outside 1..2"},
		{"unknown config policy", []string{"--config", "testdata/sluice.yaml", "--policy", "nope"}, exitError, `no policy "nope" (defined: per-user, shaped, exact)`},
		{"zero duration", []string{"--compare", "--duration", "0s"}, exitUsage, "--duration must be positive, got 0s"},
		{"zero step", []string{"--compare", "--step", "0s"}, exitUsage, "--step must be positive"},
		{"zero cost", []string{"--compare", "--cost", "0"}, exitUsage, "--cost must be positive, got 0"},
		{"zero limit", []string{"--compare", "--limit", "0"}, exitUsage, "--limit must be positive"},
		{"too many requests", []string{"--compare", "--duration", "10000h"}, exitUsage, "is 360000000 requests, more than the 20000000"},
		{"field twice", []string{"--policy", "token_bucket:capacity=10,rate=1,capacity=20"}, exitUsage, "capacity given twice"},
		{"ok", []string{"--compare", "--duration", "1s"}, exitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if got := runSimulate(tt.args, Env{Stdout: &stdout, Stderr: &stderr}); got != tt.want {
				t.Fatalf("runSimulate(%q) = %d, want %d; stderr:\n%s", tt.args, got, tt.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.msg) {
				t.Errorf("runSimulate(%q) stderr = %q, want it to mention %q", tt.args, stderr.String(), tt.msg)
			}
			if tt.want == exitOK && stdout.Len() == 0 {
				t.Errorf("runSimulate(%q) wrote nothing to stdout", tt.args)
			}
		})
	}
}

// TestSeed: the same seed gives the same output byte for byte, another seed
// other traffic.
func TestSeed(t *testing.T) {
	t.Parallel()
	run := func(seed string) string {
		var out, errb bytes.Buffer
		args := []string{"--compare", "--pattern", "poisson", "--rps", "15", "--duration", "20s", "--seed", seed, "--svg", filepath.Join(t.TempDir(), "c.svg")}
		if code := runSimulate(args, Env{Stdout: &out, Stderr: &errb}); code != exitOK {
			t.Fatalf("runSimulate(%q) = %d: %s", args, code, errb.String())
		}
		svg, err := os.ReadFile(args[len(args)-1])
		if err != nil {
			t.Fatal(err)
		}
		return out.String() + string(svg)
	}
	a, b, c := run("42"), run("42"), run("43")
	if a != b {
		t.Errorf("two runs with --seed 42 differ")
	}
	if a == c {
		t.Errorf("runs with --seed 42 and --seed 43 are identical")
	}
}

// TestBoundaryDefaultStep: without --step, the boundary
// pattern's timeline steps by W/10 (or --spread), so the two bursts on each
// side of the boundary show in rows of their own.
func TestBoundaryDefaultStep(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		rows []string
	}{
		{[]string{"--algorithm", "fixed_window", "--limit", "10", "--window", "1s", "--pattern", "boundary"}, []string{"\n900ms ", "\n1s ", "\n1.1s "}},
		{[]string{"--algorithm", "fixed_window", "--limit", "10", "--window", "1m", "--pattern", "boundary", "--spread", "1s"}, []string{"\n59s ", "\n1m0s ", "\n1m1s "}},
	} {
		var stdout, stderr bytes.Buffer
		if code := runSimulate(tt.args, Env{Stdout: &stdout, Stderr: &stderr}); code != exitOK {
			t.Fatalf("runSimulate(%q) = %d: %s", tt.args, code, stderr.String())
		}
		for _, row := range tt.rows {
			if !strings.Contains(stdout.String(), row) {
				t.Errorf("runSimulate(%q): no timeline row %q:\n%s", tt.args, strings.TrimSpace(row), stdout.String())
			}
		}
	}
}

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, label, str string }{
		{"token_bucket:capacity=10,rate=1", "token_bucket", "token_bucket(capacity=10, rate=1/s)"},
		{"gcra: burst=5, rate=100/1m", "gcra", "gcra(burst=5, rate=1.6666666666666667/s)"},
		{"leaky_bucket:capacity=3,rate=5/s,mode=shape,max_delay=1s", "leaky_bucket/shape", "leaky_bucket(capacity=3, rate=5/s, mode=shape, max_delay=1s)"},
		{"sliding_log:limit=10,window=1m,name=exact", "exact", "sliding_log(limit=10, window=1m0s)"},
	} {
		s, err := parsePolicy(tc.in)
		if err != nil {
			t.Errorf("parsePolicy(%q): %v", tc.in, err)
			continue
		}
		if s.Label != tc.label || s.Policy.String() != tc.str {
			t.Errorf("parsePolicy(%q) = %q %s, want %q %s", tc.in, s.Label, s.Policy, tc.label, tc.str)
		}
	}
	for _, bad := range []string{"", "token_bucket", "token_bucket:capacity", "token_bucket:capacity=x,rate=1",
		"fixed_window:limit=1,window=soon", "nope:limit=1", "gcra:burst=1,rate=1,colour=red"} {
		if _, err := parsePolicy(bad); err == nil {
			t.Errorf("parsePolicy(%q) succeeded, want an error", bad)
		}
	}
}
