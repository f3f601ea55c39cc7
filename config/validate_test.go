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
