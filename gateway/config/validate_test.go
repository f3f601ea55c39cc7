package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// A shape policy without max_delay keeps its meaning, the wait bounded only
// by the capacity (zero in ratelimit), whether it comes from a file or is
// built in Go; only an explicit 0 in a file is rejected (see
// testdata/check/max_delay.yaml).
func TestMaxDelayLeftOut(t *testing.T) {
	c := mustParse(t, `
policies:
  shaped: {algorithm: leaky_bucket, capacity: 10, rate: 5, mode: shape}
routes:
  - id: a
    match: {path: /a}
    upstream: http://127.0.0.1:8081
    limits: [{policy: shaped, key: ip}]
`, nil)
	p := c.Policy("shaped")
	if p == nil || p.Mode() != ratelimit.Shape || kit.ParamsOf(p).MaxDelayMicros != 0 {
		t.Fatalf("Policy(shaped) = %v, want shape mode with MaxDelayMicros 0", p)
	}
	if eff := c.Effective(); strings.Contains(eff, "max_delay") {
		t.Errorf("Effective() shows a max_delay that was left out:\n%s", eff)
	}

	g := &Config{
		Policies: map[string]PolicySpec{"shaped": {Algorithm: ratelimit.LeakyBucket, Capacity: 10, Rate: 5, Mode: ratelimit.Shape}},
		Routes:   []Route{{ID: "a", Match: Match{Path: "/a"}, Upstream: "http://127.0.0.1:1"}},
	}
	ApplyDefaults(g)
	if err := g.Validate(); err != nil {
		t.Errorf("Validate(shape without MaxDelay) = %v, want nil", err)
	}
}

// The respond and path rules hold for a Config built in Go too, where the
// errors carry no position.
func TestValidateGoRespondAndPath(t *testing.T) {
	c := &Config{Routes: []Route{
		{ID: "a", Match: Match{Path: "/a/../b"}, Respond: &Respond{Status: 101}},
		{ID: "b", Match: Match{Path: "/b"}, Respond: &Respond{Status: 204, Body: "x"}},
		{ID: "c", Match: Match{Path: "/c"}, Respond: &Respond{Headers: map[string]string{"X-A": "1\r\nX-B: 2", "X-Tab": "1\t2"}}},
		{ID: "d", Match: Match{Path: "/d", Headers: map[string]string{"X-Env": "prod\n", "X-Tab": "a\tb"}}, Respond: &Respond{Status: 200}},
	}}
	ApplyDefaults(c)
	var errs Errors
	if err := c.Validate(); !errors.As(err, &errs) {
		t.Fatalf("Validate = %v, want Errors", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`routes[0].match.path: path "/a/../b": segment ".." never matches: a request path with a "." or ".." segment matches no route`,
		`routes[0].respond.status: must be an HTTP status from 200 to 599, got 101`,
		`routes[1].respond.body: must be empty with status 204: a 204 response has no body, so it would be dropped`,
		`routes[2].respond.headers.X-A: "1\r\nX-B: 2" is not a valid HTTP header value: it contains a control character (CR, LF and other control characters are not allowed; tab is)`,
		`routes[3].match.headers.X-Env: "prod\n" never matches: a request header value cannot contain a control character other than tab`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate errors (-want +got):\n%s", diff)
	}
}

// A Config built in Go can hold key parts and on_empty_key values no file
// decodes to; Validate reports them.
func TestValidateGoKeys(t *testing.T) {
	g := &Config{
		Policies: map[string]PolicySpec{"p": {Algorithm: ratelimit.GCRA, Burst: 5, Rate: 1}},
		Routes: []Route{{ID: "a", Match: Match{Path: "/a"}, Upstream: "http://127.0.0.1:1", Limits: []Limit{{
			Policy:     "p",
			Key:        httplimit.Key{{Source: httplimit.SourceIP}, {Source: httplimit.SourceHeader, Name: "X Y"}},
			OnEmptyKey: httplimit.EmptyKey(9),
			Plans:      &Plans{From: httplimit.KeyPart{Source: httplimit.SourceQuery}, Policies: map[string]string{"a": "p"}},
		}}}},
	}
	ApplyDefaults(g)
	err := g.Validate()
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Validate() = %v, want Errors", err)
	}
	var paths []string
	for _, e := range es {
		paths = append(paths, e.Path)
	}
	want := []string{"routes[0].limits[0].key[1]", "routes[0].limits[0].plans.from", "routes[0].limits[0].on_empty_key"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("Validate() problems at (-want +got):\n%s\n%v", diff, err)
	}
}

// TestStoreModes decodes each store.on_error and store.redis.mode value into
// its typed constant, and refuses an unknown or empty one at the line that
// gives it, with the message `sluice check` shows.
func TestStoreModes(t *testing.T) {
	const routes = `
routes:
  - {id: a, match: {path: /a}, upstream: "http://127.0.0.1:1"}
`
	tests := []struct {
		name    string
		store   string // the store section, from line 2 of the file
		onError OnError
		mode    RedisMode
		err     string // the one error Parse reports; empty for a valid file
	}{
		{name: "on_error local", store: "  on_error: local", onError: OnErrorLocal, mode: RedisStandalone},
		{name: "on_error allow", store: "  on_error: allow", onError: OnErrorAllow, mode: RedisStandalone},
		{name: "on_error deny", store: "  on_error: deny", onError: OnErrorDeny, mode: RedisStandalone},
		{name: "on_error left out", store: "  type: memory", onError: OnErrorLocal, mode: RedisStandalone},
		{name: "on_error from a variable", store: `  on_error: "${ON_ERROR:-deny}"`, onError: OnErrorDeny, mode: RedisStandalone},
		{name: "redis standalone",
			store:   "  type: redis\n  redis: {mode: standalone, addrs: [\"127.0.0.1:6379\"]}",
			onError: OnErrorLocal, mode: RedisStandalone},
		{name: "redis sentinel",
			store:   "  type: redis\n  redis: {mode: sentinel, master_name: m, addrs: [\"127.0.0.1:26379\"]}",
			onError: OnErrorLocal, mode: RedisSentinel},
		{name: "redis cluster",
			store:   "  type: redis\n  on_error: allow\n  redis:\n    mode: cluster\n    addrs: [\"127.0.0.1:7000\", \"127.0.0.1:7001\"]",
			onError: OnErrorAllow, mode: RedisCluster},
		{name: "redis mode left out",
			store:   "  type: redis\n  redis: {addrs: [\"127.0.0.1:6379\"]}",
			onError: OnErrorLocal, mode: RedisStandalone},
		// The redis section is ignored unless store.type is redis.
		{name: "redis mode of a memory store", store: "  type: memory\n  redis: {mode: replicated}",
			onError: OnErrorLocal, mode: "replicated"},
		{name: "unknown on_error", store: "  type: memory\n  on_error: fail-open",
			err: `test.yaml:3:13: store.on_error: unknown on_error "fail-open" (allowed: local, allow, deny)`},
		{name: "on_error in another case", store: "  on_error: Deny",
			err: `test.yaml:2:13: store.on_error: unknown on_error "Deny" (allowed: local, allow, deny)`},
		{name: "empty on_error", store: `  on_error: ""`,
			err: `test.yaml:2:13: store.on_error: is empty (allowed: local, allow, deny)`},
		{name: "unknown redis mode", store: "  type: redis\n  redis:\n    addrs: [\"127.0.0.1:6379\"]\n    mode: replicated",
			err: `test.yaml:5:11: store.redis.mode: unknown redis mode "replicated" (allowed: standalone, sentinel, cluster)`},
		{name: "empty redis mode", store: "  type: redis\n  redis: {mode: \"\", addrs: [\"127.0.0.1:6379\"]}",
			err: `test.yaml:3:17: store.redis.mode: is empty (allowed: standalone, sentinel, cluster)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "store:\n" + tt.store + routes
			if tt.err != "" {
				errs := parseErrors(t, src, nil)
				if len(errs) != 1 || errs[0].Error() != tt.err {
					t.Errorf("Parse errors:\n%v\nwant exactly:\n%s", errs, tt.err)
				}
				return
			}
			c := mustParse(t, src, nil)
			if c.Store.OnError != tt.onError || c.Store.Redis.Mode != tt.mode {
				t.Errorf("on_error %q, redis mode %q; want %q, %q", c.Store.OnError, c.Store.Redis.Mode, tt.onError, tt.mode)
			}
		})
	}
}

// A Config built in Go gets the same checks on its store modes, without
// positions.
func TestStoreModesGoConfig(t *testing.T) {
	c := &Config{
		Store:  Store{Type: StoreRedis, OnError: "fail-open", Redis: Redis{Mode: "replicated", Addrs: []string{"127.0.0.1:6379"}}},
		Routes: []Route{{ID: "a", Match: Match{Path: "/a"}, Upstream: "http://127.0.0.1:1"}},
	}
	ApplyDefaults(c)
	var errs Errors
	if err := c.Validate(); !errors.As(err, &errs) {
		t.Fatalf("Validate = %v, want Errors", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`store.on_error: unknown on_error "fail-open" (allowed: local, allow, deny)`,
		`store.redis.mode: unknown redis mode "replicated" (allowed: standalone, sentinel, cluster)`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate errors (-want +got):\n%s", diff)
	}
}
