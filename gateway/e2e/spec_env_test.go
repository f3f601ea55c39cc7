package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSpecEnvExpansion: `sluice serve` replaces ${NAME} and ${NAME:-default}
// from its environment (README.md, "Configuration reference"), in scalars
// and in flow collections alike.
// Not parallel: t.Setenv changes the environment the child inherits, and
// the package's parallel tests only start after the sequential ones.
func TestSpecEnvExpansion(t *testing.T) {
	up := newHostileUpstream(t)
	t.Setenv("SLUICE_E2E_UPSTREAM", up.URL)
	t.Setenv("SLUICE_E2E_GREETING", "hello from the environment")
	t.Setenv("SLUICE_E2E_LIMIT_HEADER", "X-Tenant")
	t.Setenv("SLUICE_E2E_SET", "set-value")
	t.Setenv("SLUICE_E2E_EMPTY", "")
	p := start(t, `store: {type: memory}`+header+`
policies:
  two: {algorithm: fixed_window, limit: 2, window: 24h}
routes:
  - id: hello
    match: {path: /hello}
    respond:
      body: "${SLUICE_E2E_GREETING}"
      headers: {X-Default: "${SLUICE_E2E_UNSET_WITH_DEFAULT:-fallback text}", X-Set: "${SLUICE_E2E_SET:-not used}", X-Empty: "${SLUICE_E2E_EMPTY:-empty uses default}"}
  - id: api
    match: {path: /api/**}
    upstream: ${SLUICE_E2E_UPSTREAM}
    limits: [{policy: two, key: "header:${SLUICE_E2E_LIMIT_HEADER}"}]
`)
	r := get(t, p.base+"/hello")
	if r.code != 200 || r.body != "hello from the environment" {
		t.Errorf("GET /hello = %d %q, want the body from ${SLUICE_E2E_GREETING}", r.code, r.body)
	}
	for h, want := range map[string]string{"X-Default": "fallback text", "X-Set": "set-value", "X-Empty": "empty uses default"} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	// The upstream and the key's header name came from the environment.
	for i := range 3 {
		r := get(t, p.base+"/api/x", "X-Tenant", "t1")
		if want := i < 2; want != (r.code == 200) {
			t.Errorf("request %d keyed by X-Tenant: %d %s", i+1, r.code, r.body)
		}
	}
	if n := up.count(); n != 2 {
		t.Errorf("the upstream from ${SLUICE_E2E_UPSTREAM} saw %d requests, want 2", n)
	}
	if r := get(t, p.base+"/api/x"); r.code != 403 {
		t.Errorf("without X-Tenant: %d, want 403 (the key is header:X-Tenant)", r.code)
	}
}

// TestSpecEnvUnsetVariable: an unset ${NAME} with no default makes serve
// exit non-zero with an error naming the variable and FILE:LINE.
func TestSpecEnvUnsetVariable(t *testing.T) {
	t.Parallel()
	const name = "SLUICE_E2E_NEVER_SET_7F3A"
	if _, ok := os.LookupEnv(name); ok {
		t.Skipf("%s is set in the test environment", name)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	yaml := header + `
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "x ${` + name + `} y"}
`
	os.WriteFile(path, []byte(yaml), 0o600)
	line := 1 + strings.Count(yaml[:strings.Index(yaml, "${")], "\n")
	out, errOut, code := runSluice(t, dir, "serve", "--config", path)
	if code == 0 {
		t.Fatalf("serve with an unset variable exited 0; stdout %q stderr %q", out, errOut)
	}
	want := regexp.MustCompile(regexp.QuoteMeta(path) + `:` + strconv.Itoa(line) + `:\d+: .*` + name)
	if !want.MatchString(errOut + out) {
		t.Errorf("serve's error does not name %s at %s:%d:\nstdout %s\nstderr %s", name, filepath.Base(path), line, out, errOut)
	}
}
