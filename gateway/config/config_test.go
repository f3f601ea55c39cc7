package config

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/testcert"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// minimal is the smallest valid configuration.
const minimal = `
routes:
  - id: a
    match: {path: /a}
    upstream: http://127.0.0.1:8081
`

func mustParse(t *testing.T, src string, env map[string]string) *Config {
	t.Helper()
	c, err := Parse("test.yaml", []byte(src), mapLookup(env))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return c
}

func mapLookup(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

// parseErrors parses src and returns its errors, failing if it is valid.
func parseErrors(t *testing.T, src string, env map[string]string) Errors {
	t.Helper()
	_, err := Parse("test.yaml", []byte(src), mapLookup(env))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error = %v (%T), want config.Errors", err, err)
	}
	return errs
}

func TestDefaults(t *testing.T) {
	c := mustParse(t, minimal+`
  - id: b
    match: {path: /b}
    respond: {body: hi}
    limits:
      - {policy: p, key: ip}
policies:
  p: {algorithm: leaky_bucket, capacity: 5, rate: 1}
`, nil)
	want := Server{
		Listen: "127.0.0.1:8080", ShutdownTimeout: 15 * time.Second,
		ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16384, MaxConns: 4096,
		HTTP2: HTTP2{MaxConcurrentStreams: 100},
	}
	if diff := cmp.Diff(want, c.Server); diff != "" {
		t.Errorf("server defaults (-want +got):\n%s", diff)
	}
	if c.Admin != (Admin{Listen: "127.0.0.1:9090"}) {
		t.Errorf("admin = %+v", c.Admin)
	}
	wantStore := Store{Type: "memory", Prefix: "sluice", Timeout: 50 * time.Millisecond, OnError: "local", Redis: Redis{Mode: "standalone"},
		Memory: Memory{MaxKeys: 1 << 20}, LocalDeny: LocalDeny{Enabled: new(true), MaxKeys: 100_000}}
	if diff := cmp.Diff(wantStore, c.Store); diff != "" {
		t.Errorf("store defaults (-want +got):\n%s", diff)
	}
	if got := c.Routes[0].Timeout; got != 30*time.Second {
		t.Errorf("upstream route timeout = %v, want 30s", got)
	}
	if got := c.Routes[1].Timeout; got != 0 {
		t.Errorf("respond route timeout = %v, want 0 (not applicable)", got)
	}
	if got := c.Routes[1].Respond.Status; got != 200 {
		t.Errorf("respond status = %d, want 200", got)
	}
	l := c.Routes[1].Limits[0]
	if l.Cost != 1 || l.OnEmptyKey != httplimit.EmptyKeyDeny {
		t.Errorf("limit defaults: cost %d on_empty_key %q, want 1 deny", l.Cost, l.OnEmptyKey)
	}
	if got := c.Policies["p"].Mode; got != ratelimit.Police {
		t.Errorf("leaky_bucket mode = %q, want police", got)
	}
}

func TestApplyDefaultsKeepsSetValuesAndIsIdempotent(t *testing.T) {
	c := &Config{
		Server: Server{Listen: ":1", ShutdownTimeout: time.Second, MaxHeaderBytes: 1 << 20},
		Store:  Store{Type: StoreRedis, OnError: OnErrorDeny, Redis: Redis{Mode: RedisCluster}},
		Routes: []Route{{ID: "a", Upstream: "http://x", Timeout: time.Minute, Limits: []Limit{{Cost: 3, OnEmptyKey: httplimit.EmptyKeySkip}}}},
	}
	ApplyDefaults(c)
	once := *c
	once.Routes = append([]Route(nil), c.Routes...)
	ApplyDefaults(c)
	if diff := cmp.Diff(once, *c, cmpopts.IgnoreUnexported(Config{})); diff != "" {
		t.Errorf("second ApplyDefaults changed the config (-first +second):\n%s", diff)
	}
	if c.Server.Listen != ":1" || c.Server.ShutdownTimeout != time.Second || c.Server.MaxHeaderBytes != 1<<20 ||
		c.Store.Type != StoreRedis || c.Store.OnError != OnErrorDeny || c.Store.Redis.Mode != RedisCluster ||
		c.Routes[0].Timeout != time.Minute || c.Routes[0].Limits[0].Cost != 3 || c.Routes[0].Limits[0].OnEmptyKey != httplimit.EmptyKeySkip {
		t.Errorf("ApplyDefaults replaced set values: %+v", c)
	}
	if c.Server.IdleTimeout != DefaultIdleTimeout || c.Store.Prefix != DefaultStorePrefix {
		t.Errorf("ApplyDefaults left unset values: idle %v prefix %q", c.Server.IdleTimeout, c.Store.Prefix)
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "alpha", "EMPTY": "", "N": "42", "DOLLAR": "$x"}
	tests := []struct {
		in, want string
		problem  string // substring of the only problem, if any
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha"},
		{in: "x${A}y${N}z", want: "xalphay42z"},
		{in: "${MISSING:-def}", want: "def"},
		{in: "${MISSING:-}", want: ""},
		{in: "${A:-def}", want: "alpha"},
		{in: "${EMPTY:-def}", want: "def"},
		{in: "${EMPTY}", want: ""},
		{in: "${MISSING:-a:-b}", want: "a:-b"},
		{in: "$$", want: "$"},
		{in: "$${A}", want: "${A}"},
		{in: "$$$${A}", want: "$${A}"},
		{in: "price $5", want: "price $5"},
		{in: "end$", want: "end$"},
		{in: "$A", want: "$A"},
		{in: "${DOLLAR}", want: "$x"}, // values are not expanded again
		{in: "${MISSING}", problem: `"MISSING" is not set`},
		{in: "${}", problem: "invalid variable reference ${}"},
		{in: "${1A}", problem: "invalid variable reference"},
		{in: "${A B}", problem: "invalid variable reference"},
		{in: "${A", problem: "unterminated"},
		{in: "${A-def}", problem: "invalid variable reference"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, problems := expand(tt.in, mapLookup(env))
			switch {
			case tt.problem == "" && len(problems) > 0:
				t.Errorf("expand(%q) problems %q, want none", tt.in, problems)
			case tt.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0], tt.problem)):
				t.Errorf("expand(%q) problems %q, want one containing %q", tt.in, problems, tt.problem)
			case tt.problem == "" && got != tt.want:
				t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if _, problems := expand("${X} and ${Y}", nil); len(problems) != 2 {
		t.Errorf("expand with two unset variables: %d problems, want 2: %q", len(problems), problems)
	}
}

func TestEnvExpansionInFile(t *testing.T) {
	src := `
server:
  listen: "${LISTEN:-127.0.0.1:8080}"
  max_header_bytes: ${MAX_HEADER:-8192}
  shutdown_timeout: ${GRACE}
admin:
  token: ${TOKEN}
store:
  redis:
    password: "p$$ss${PW_SUFFIX:-}"
policies:
  p: {algorithm: token_bucket, capacity: "${CAP}", rate: "${RATE}"}
routes:
  - id: a
    match: {path: /a, headers: {"${HDR}": "v"}}
    upstream: "http://${HOST}:8081"
    preserve_host: ${PRESERVE}
    limits:
      - policy: p
        key: header:${USER_HEADER}
        overrides: {"${VIP_KEY}": p}
`
	env := map[string]string{
		"GRACE": "3s", "TOKEN": "tok$en", "CAP": "7", "RATE": "30/1m", "HDR": "X-Env", "HOST": "backend",
		"PRESERVE": "true", "USER_HEADER": "X-User", "VIP_KEY": "demo",
	}
	c := mustParse(t, src, env)
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.listen", c.Server.Listen, "127.0.0.1:8080"},
		{"server.max_header_bytes", c.Server.MaxHeaderBytes, 8192},
		{"server.shutdown_timeout", c.Server.ShutdownTimeout, 3 * time.Second},
		{"admin.token", c.Admin.Token, "tok$en"},
		{"store.redis.password", c.Store.Redis.Password, "p$ss"},
		{"policies.p.capacity", c.Policies["p"].Capacity, int64(7)},
		{"policies.p.rate", c.Policies["p"].Rate, 0.5},
		{"match.headers", c.Routes[0].Match.Headers, map[string]string{"X-Env": "v"}},
		{"upstream", c.Routes[0].Upstream, "http://backend:8081"},
		{"preserve_host", c.Routes[0].PreserveHost, true},
		{"key", c.Routes[0].Limits[0].Key, httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}}},
		{"overrides", c.Routes[0].Limits[0].Overrides, map[string]string{"demo": "p"}},
	}
	for _, ck := range checks {
		if diff := cmp.Diff(ck.want, ck.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", ck.name, diff)
		}
	}

	// Unset variables are reported, each at its own line, all at once.
	errs := parseErrors(t, src, map[string]string{"CAP": "ten"})
	var lines []int
	for _, e := range errs {
		lines = append(lines, e.Line)
	}
	wantLines := []int{5, 7, 12, 12, 15, 16, 17, 20, 21}
	if diff := cmp.Diff(wantLines, lines); diff != "" {
		t.Errorf("error lines (-want +got):\n%s\nerrors:\n%v", diff, errs)
	}
	if !strings.Contains(errs[0].Message, `"GRACE" is not set`) || errs[0].Path != "server.shutdown_timeout" {
		t.Errorf("first error = %v, want GRACE unset at server.shutdown_timeout", errs[0])
	}
}

// A variable's value is text: it cannot add YAML structure.
func TestEnvValueCannotInjectYAML(t *testing.T) {
	src := minimal + "admin:\n  token: ${TOKEN}\n"
	c := mustParse(t, src, map[string]string{"TOKEN": "x\nserver: {listen: \":1\"}"})
	if c.Admin.Token != "x\nserver: {listen: \":1\"}" || c.Server.Listen != DefaultListen {
		t.Errorf("token %q listen %q: the value changed the structure", c.Admin.Token, c.Server.Listen)
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		err  bool
	}{
		{"10", 10, false},
		{"0.5", 0.5, false},
		{"100/1m", 100.0 / 60, false},
		{"5/s", 5, false},
		{"300/m", 5, false},
		{"3600/h", 1, false},
		{"1/1h30m", 1.0 / 5400, false},
		{"2/500ms", 4, false},
		{"1/.5s", 2, false},
		{"", 0, true},
		{"ten", 0, true},
		{"10/", 0, true},
		{"10/x", 0, true},
		{"10/0s", 0, true},
		{"10/-1s", 0, true},
		{"-5/s", 0, true},
		{"0", 0, true},
		{"NaN", 0, true},
		{"inf/s", 0, true},
		{"0x10", 0, true},
		{"1/2/3", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		switch {
		case tt.err && err == nil:
			t.Errorf("ParseRate(%q) = %v, want an error", tt.in, got)
		case !tt.err && err != nil:
			t.Errorf("ParseRate(%q) error %v", tt.in, err)
		case !tt.err && math.Abs(got-tt.want) > 1e-12*tt.want:
			t.Errorf("ParseRate(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "sluice.yaml", Line: 14, Col: 17, Path: "routes[0].limits[1].policy", Message: `unknown policy "per_user" (defined: per-user, hourly)`},
			`sluice.yaml:14:17: routes[0].limits[1].policy: unknown policy "per_user" (defined: per-user, hourly)`},
		{Error{File: "f.yaml", Line: 2, Col: 1, Message: "invalid YAML: x"}, "f.yaml:2:1: invalid YAML: x"},
		{Error{Path: "store.type", Message: "bad"}, "store.type: bad"},
		{Error{Message: "bad"}, "bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	errs := Errors{&tests[0].e, &tests[1].e}
	if got, want := errs.Error(), tests[0].want+"\n"+tests[1].want; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
	var e *Error
	if !errors.As(error(errs), &e) || e != &tests[0].e {
		t.Errorf("errors.As(Errors, *Error) = %v", e)
	}
}

// A small config with two policies and one route, as a first config is written.
func TestStyleExample(t *testing.T) {
	src := `policies:
  per-user: {algorithm: token_bucket, capacity: 10, rate: 1}
  hourly: {algorithm: fixed_window, limit: 100, window: 1h}
routes:
  - id: api
    match:
      path: /api/**
    upstream: http://127.0.0.1:8081
    limits:
      - policy: per-user
        key: ip
      - key: ip
        cost: 1
        policy: per_user
`
	_, err := Parse("sluice.yaml", []byte(src), nil)
	want := `sluice.yaml:14:17: routes[0].limits[1].policy: unknown policy "per_user" (defined: per-user, hourly)`
	if err == nil || err.Error() != want {
		t.Errorf("Parse error:\n%v\nwant:\n%s", err, want)
	}
}

// Effective's output parses back to the same configuration.
func TestEffectiveRoundTrip(t *testing.T) {
	tlsFixtures(t)
	files, _ := filepath.Glob("testdata/check/*_ok.yaml")
	if len(files) == 0 {
		t.Fatal("no valid fixtures")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c, err := Load(file, testLookup)
			if err != nil {
				t.Fatal(err)
			}
			eff := c.Effective()
			back, err := Parse("effective.yaml", []byte(eff), nil)
			if err != nil {
				t.Fatalf("effective config does not parse:\n%v\n%s", err, eff)
			}
			if c.Admin.Token != "" {
				c.Admin.Token = redacted
			}
			if c.Store.Redis.Password != "" {
				c.Store.Redis.Password = redacted
			}
			if c.Store.Redis.SentinelPassword != "" {
				c.Store.Redis.SentinelPassword = redacted
			}
			if diff := cmp.Diff(c, back, cmpopts.IgnoreUnexported(Config{}, RLS{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("round trip (-loaded +reparsed):\n%s", diff)
			}
			if c.RLS != nil && back.RLS != nil {
				// Parse does not read envoy_config's files; Load did.
				back.RLS.envoy = c.RLS.envoy
			}
			if got := back.Effective(); got != eff {
				t.Errorf("Effective is not a fixed point:\n%s", cmp.Diff(eff, got))
			}
		})
	}
}

func TestCompiledPolicies(t *testing.T) {
	c, err := Load("testdata/check/spec_example_ok.yaml", testLookup)
	if err != nil {
		t.Fatal(err)
	}
	ps := c.CompiledPolicies()
	if len(ps) != 10 {
		t.Fatalf("CompiledPolicies() has %d policies, want 10", len(ps))
	}
	for name, p := range ps {
		if p.Name() != name || c.Policy(name) != p {
			t.Errorf("policy %q: Name %q, Policy() %p vs %p", name, p.Name(), c.Policy(name), p)
		}
	}
	if got := ps["per-user"].String(); got != "token_bucket(capacity=10, rate=1/s)" {
		t.Errorf("per-user = %s", got)
	}
	if got := ps["shaped"]; got.Mode() != ratelimit.Shape || kit.ParamsOf(got).MaxDelayMicros != 2e6 {
		t.Errorf("shaped = %s", got)
	}
	if c.Policy("nope") != nil {
		t.Error("Policy(nope) != nil")
	}
	want := []string{"per-user", "hourly", "smooth", "shaped", "exact", "approx", "lean", "vip", "free-tier", "pro-tier"}
	if diff := cmp.Diff(want, c.PolicyNames()); diff != "" {
		t.Errorf("PolicyNames (-want +got):\n%s", diff)
	}
	if got := c.Routes[0].UpstreamURL(); got == nil || got.Host != "127.0.0.1:8081" {
		t.Errorf("UpstreamURL() = %v", got)
	}
	if c.Routes[1].UpstreamURL() != nil {
		t.Error("respond route has an UpstreamURL")
	}
	if got := c.Server.TrustedPrefixes(); len(got) != 1 || got[0].String() != "10.0.0.0/8" {
		t.Errorf("TrustedPrefixes() = %v", got)
	}
}

func TestValidateGoConfig(t *testing.T) {
	c := &Config{
		Policies: map[string]PolicySpec{"p": {Algorithm: ratelimit.GCRA, Burst: 5, Rate: 1}},
		Routes: []Route{{
			ID: "a", Match: Match{Path: "/a/**"}, Upstream: "http://127.0.0.1:1",
			Limits: []Limit{{Policy: "p", Key: httplimit.Key{{Source: httplimit.SourceIP}}}},
		}},
	}
	ApplyDefaults(c)
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.Policy("p") == nil || c.Policy("p") != c.Policy("p") {
		t.Error("Validate did not compile the policies once")
	}

	c.Routes[0].Limits[0].Cost = 6
	c.Routes = append(c.Routes, Route{ID: "a", Match: Match{Path: "x"}, Respond: &Respond{Status: 99}})
	err := c.Validate()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Validate = %v, want Errors", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`routes[0].limits[0].cost: cost 6 is above the burst 5 of policy "p", so no request could ever be admitted`,
		`routes[1].id: duplicate route id "a" (first used by routes[0])`,
		`routes[1].match.path: path "x" must start with /`,
		`routes[1].respond.status: must be an HTTP status from 200 to 599, got 99`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate errors (-want +got):\n%s", diff)
	}
}

func TestLoadFileErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte(strings.Repeat("#", MaxFileSize+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(big, nil)
	var errs Errors
	if !errors.As(err, &errs) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(big) = %v, want a size error", err)
	}
}

func TestInvalidUTF8(t *testing.T) {
	errs := parseErrors(t, "routes:\n  - id: a\xff\n", nil)
	if len(errs) != 1 || errs[0].Line != 2 || errs[0].Col != 10 || !strings.Contains(errs[0].Message, "UTF-8") {
		t.Errorf("errors = %v, want one UTF-8 error at 2:10", errs)
	}
}

func TestTooDeep(t *testing.T) {
	for _, src := range []string{
		strings.Repeat("[", 100000),
		strings.Repeat("- ", 100000) + "x",
		"a: " + strings.Repeat("{b: ", 600),
	} {
		errs := parseErrors(t, src, nil)
		if len(errs) != 1 || !strings.Contains(errs[0].Message, "nesting is too deep") {
			t.Errorf("Parse(%.20q...) = %v, want one nesting error", src, errs)
		}
	}
}

// Aliases cannot blow up: expansion is bounded.
func TestAliasBomb(t *testing.T) {
	list := func(item string, n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+", ", n), ", ") + "]"
	}
	src := "policies: {p: {algorithm: gcra, burst: 5, rate: 1}}\n" +
		"x-k: &k " + list("ip", 200) + "\n" +
		"x-l: &l " + list("{policy: p, key: *k}", 200) + "\n" +
		"x-r: &r {id: a, match: {path: /a}, upstream: \"http://127.0.0.1:1\", limits: *l}\n" +
		"routes: " + list("*r", 200) + "\n"
	start := time.Now()
	errs := parseErrors(t, src, nil)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("alias bomb took %v", d)
	}
	if len(errs) == 0 || !strings.Contains(errs.Error(), "too many values") {
		t.Fatalf("errors = %.300v, want a too many values error", errs)
	}
}

// Merge keys that refer to themselves end with an error, not a hang.
func TestMergeCycle(t *testing.T) {
	errs := parseErrors(t, "routes:\n  - &r\n    id: a\n    <<: *r\n", nil)
	if len(errs) == 0 || !strings.Contains(errs.Error(), "nested too deep") {
		t.Fatalf("errors = %v, want a merge depth error", errs)
	}
}

// Every sluice config shipped in /examples loads. Variables count as set
// but empty, so ${NAME:-default} takes its default and ${NAME} is "".
// examples/envoy/envoy.yaml is Envoy's own config, not sluice's. An
// example whose header gives the openssl command that makes its key pair
// (tls/cert.pem, tls/key.pem; no key is committed) is loaded as a copy
// beside such a pair; gateway/internal/cli's TestShippedConfigsCheck runs
// the command itself.
func TestExamplesLoad(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	more, _ := filepath.Glob("../../examples/*/*.yaml")
	files = append(files, more...)
	if len(files) == 0 {
		t.Skip("no examples yet")
	}
	empty := func(string) (string, bool) { return "", true }
	for _, f := range files {
		if filepath.ToSlash(f) == "../../examples/envoy/envoy.yaml" {
			continue
		}
		file := f
		if text, err := os.ReadFile(f); err == nil && strings.Contains(string(text), "openssl req") {
			dir := t.TempDir()
			file = filepath.Join(dir, filepath.Base(f))
			if err := os.WriteFile(file, text, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "tls"), 0o700); err != nil {
				t.Fatal(err)
			}
			testcert.SelfSigned(t, filepath.Join(dir, "tls"))
		}
		if _, err := Load(file, empty); err != nil {
			t.Errorf("%s:\n%v", f, err)
		}
	}
}
