package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRLSEnvoyFileErrors: problems in an envoyproxy/ratelimit file are
// reported at that file's line and column, every one of them.
func TestRLSEnvoyFileErrors(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs("testdata/rls/broken.yaml")
	if err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "sluice.yaml")
	yaml := "rls:\n  envoy_config: [\"" + abs + "\", missing.yaml]\n  domains:\n    - domain: own\n      descriptors:\n        - {key: user, policy: nope}\n"
	if err := os.WriteFile(main, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(main, nil)
	if err == nil {
		t.Fatal("Load = nil error")
	}
	// The own domain's unknown policy is found by Parse, before the files
	// are read.
	if got := err.Error(); !strings.Contains(got, `sluice.yaml:6:31: rls.domains[0].descriptors[0].policy: unknown policy "nope"`) {
		t.Errorf("error:\n%s\nwant the unknown policy at 6:31", got)
	}
	if err := os.WriteFile(main, []byte(strings.Replace(yaml, "policy: nope", "rate_limit: {unit: second, requests_per_unit: 1}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(main, nil)
	got := ""
	if err != nil {
		got = err.Error()
	}
	for _, want := range []string{
		abs + `:5:13: descriptors[0].rate_limit.unit: invalid rate limit unit "fortnight"`,
		abs + `:9:5: descriptors[1]: unknown field "rate_limt"`,
		`sluice.yaml: rls.envoy_config[1]: stat ` + filepath.Join(dir, "missing.yaml"),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("error:\n%s\nwant a line containing %s", got, want)
		}
	}
}

// TestEffectiveRLS: the effective configuration shows the rls section with
// its defaults, and names each domain read from envoy_config, with its
// file, in a comment.
func TestEffectiveRLS(t *testing.T) {
	c, err := Load("testdata/check/rls_ok.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	eff := c.Effective()
	file := strconv.Quote(filepath.Join("testdata", "rls", "envoy_ok.yaml"))
	for _, want := range []string{
		"\nrls:\n  listen: \"127.0.0.1:18081\"\n",
		"\n  # domain \"edge\" from " + file + ": 3 descriptors\n",
		"\n  max_entries: 16\n",
		"\n    - domain: \"api\"\n",
	} {
		if !strings.Contains(eff, want) {
			t.Errorf("Effective() lacks %q:\n%s", want, eff)
		}
	}
	c.RLS = nil
	if eff := c.Effective(); strings.Contains(eff, "rls:") {
		t.Errorf("Effective() without an rls section shows one:\n%s", eff)
	}
}
