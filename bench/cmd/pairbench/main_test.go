package main

import (
	"regexp"
	"strings"
	"testing"
)

func TestBenchLine(t *testing.T) {
	for _, tc := range []struct {
		line, name string
		ns, allocs string
	}{
		{"BenchmarkStore/token_bucket/1key-2         \t16461187\t        76.08 ns/op\t       0 B/op\t       0 allocs/op", "Store/token_bucket/1key", "76.08", "0"},
		{"BenchmarkStore/token_bucket/100k_keys/random \t 5260294\t       238.1 ns/op", "Store/token_bucket/100k_keys/random", "238.1", ""},
		{"BenchmarkXTimeRate/1key-16 \t1\t 1234 ns/op\t 16 B/op\t 2 allocs/op", "XTimeRate/1key", "1234", "2"},
	} {
		m := benchLine.FindStringSubmatch(tc.line)
		if m == nil {
			t.Fatalf("%q: no match", tc.line)
		}
		if m[1] != tc.name || m[2] != tc.ns || m[3] != tc.allocs {
			t.Errorf("%q: name %q, ns %q, allocs %q; want %q, %q, %q", tc.line, m[1], m[2], m[3], tc.name, tc.ns, tc.allocs)
		}
	}
	for _, line := range []string{"PASS", "goos: linux", "ok  \tgithub.com/x\t1.2s"} {
		if benchLine.MatchString(line) {
			t.Errorf("%q matched", line)
		}
	}
}

// TestBenchPattern checks that a pattern selects its benchmark and not one
// whose name merely starts the same way: go test matches each level of a
// -bench pattern against the same level of a name, unanchored.
func TestBenchPattern(t *testing.T) {
	levels := strings.Split(benchPattern("Store/token_bucket/1key"), "/")
	match := func(name string) bool {
		parts := strings.Split(name, "/")
		if len(parts) < len(levels) {
			return false
		}
		for i, l := range levels {
			if !regexp.MustCompile(l).MatchString(parts[i]) {
				return false
			}
		}
		return true
	}
	if !match("BenchmarkStore/token_bucket/1key") {
		t.Error("the pattern does not select its own benchmark")
	}
	for _, other := range []string{"BenchmarkStore/token_bucket/1key_cold", "BenchmarkStore/xtoken_bucket/1key", "BenchmarkStoreX/token_bucket/1key"} {
		if match(other) {
			t.Errorf("the pattern also selects %s", other)
		}
	}
}

func TestParsePairs(t *testing.T) {
	got, err := parsePairs([]string{"BenchmarkA/x=B/y@0.5", "C=D"})
	if err != nil {
		t.Fatal(err)
	}
	want := []pair{{a: "A/x", b: "B/y", target: 0.5}, {a: "C", b: "D"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{"A", "=B", "A=", "A=B@x", "A=B@-1"} {
		if _, err := parsePairs([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3 values = %v, want 2", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 4 values = %v, want 2.5", m)
	}
}
