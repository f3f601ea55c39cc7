package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader. It must never panic or
// hang; every error must be positioned; and a file that loads must render
// an effective config that loads again to the same rendering. Seeds: every
// testdata/check fixture plus testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/check/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data, testLookup)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Parse error %T %v, want non-empty Errors", err, err)
			}
			for _, e := range errs {
				if e.File != "fuzz.yaml" || e.Line < 1 || e.Col < 1 || e.Message == "" {
					t.Fatalf("badly formed error %#v", e)
				}
			}
			return
		}
		eff := c.Effective()
		back, err := Parse("effective.yaml", []byte(eff), nil)
		if err != nil {
			t.Fatalf("the effective config of a valid file does not load:\n%v\n%s", err, eff)
		}
		if got := back.Effective(); got != eff {
			t.Fatalf("effective config changed on reload:\n%s\n---\n%s", eff, got)
		}
	})
}

// FuzzParseRate checks that a parsed rate is always finite and positive,
// and that "N/PERIOD" means N per PERIOD.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10", "0.5", "100/1m", "5/s", "1000/h", "1/1h30m", "2/500ms", "1e-3", "x/s", "10/", "/", "1/0s", "-1/s", "NaN/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
			t.Fatalf("ParseRate(%q) = %v, want finite and positive", s, r)
		}
		num, _, hasPer := strings.Cut(s, "/")
		n, _ := strconv.ParseFloat(num, 64)
		if !hasPer && r != n {
			t.Fatalf("ParseRate(%q) = %v, want %v", s, r, n)
		}
		if hasPer && r > n*1e9*(1+1e-9) {
			t.Fatalf("ParseRate(%q) = %v: more than N per nanosecond", s, r)
		}
	})
}

// FuzzExpand checks that expansion never panics and that escaping every '$'
// as "$$" always gives back the text unchanged, with no variable looked up.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"", "$", "$$", "${A}", "${A:-b}", "${", "a${B}c$${D}", "${A:-${B}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		expand(s, mapLookup(map[string]string{"A": "x"}))
		lookup := func(name string) (string, bool) {
			t.Fatalf("escaped text %q looked up %q", s, name)
			return "", false
		}
		got, problems := expand(strings.ReplaceAll(s, "$", "$$"), lookup)
		if got != s || len(problems) > 0 {
			t.Fatalf("expand(escape(%q)) = %q, %q", s, got, problems)
		}
	})
}
