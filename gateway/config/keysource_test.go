package config

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// TestCookieKey: a limit's key and plans.from may name a cookie
// (keysource's cookie:NAME), alone or in a list, and the decoded part reads
// that cookie; the effective configuration writes it back as it was given.
func TestCookieKey(t *testing.T) {
	c := mustParse(t, `
policies:
  p: {algorithm: token_bucket, capacity: 10, rate: 1}
  pro: {algorithm: token_bucket, capacity: 100, rate: 10}
routes:
  - id: api
    match: {path: /api}
    upstream: http://127.0.0.1:8081
    limits:
      - {policy: p, key: cookie:session}
      - {policy: p, key: [cookie:session, ip]}
      - policy: p
        key: [header:X-User-Id]
        plans: {from: "cookie: plan ", policies: {pro: pro}}
`, nil)
	limits := c.Routes[0].Limits
	var got []string
	for _, l := range limits {
		got = append(got, l.Key.String())
	}
	if want := "cookie:session|cookie:session,ip|header:X-User-Id"; strings.Join(got, "|") != want {
		t.Errorf("keys %q, want %s", got, want)
	}
	if from := limits[2].Plans.From; from.Source != httplimit.SourceFunc || from.String() != "cookie:plan" {
		t.Errorf("plans.from = %v (source %d), want cookie:plan", from, from.Source)
	}
	back, err := Parse("effective.yaml", []byte(c.Effective()), nil)
	if err != nil {
		t.Fatalf("effective configuration does not parse: %v", err)
	}
	if diff := cmp.Diff(c.Routes, back.Routes, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("routes after the effective configuration's round trip (-given +reparsed):\n%s", diff)
	}

	// The decoded parts read the request's cookies.
	store, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "p", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1})
	m, err := httplimit.New(httplimit.Options{Store: store, Limits: []httplimit.Limit{
		{Policy: p, Key: limits[0].Key},
		{Policy: p, Key: httplimit.Key{limits[2].Plans.From}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/api", nil)
	r.Header.Add("Cookie", "theme=dark")
	r.Header.Add("Cookie", "session=s-42; plan=pro")
	for i, want := range []string{"s-42", "pro"} {
		if parts, ok := m.KeyOf(httplimit.HTTPRequest(r), i, nil); !ok || parts[0] != want {
			t.Errorf("limit %d key %q (has value %v), want %s", i, parts, ok, want)
		}
	}
}

// TestCookieKeyErrors: a bad cookie spec is reported at its position, as
// every bad key spec is.
func TestCookieKeyErrors(t *testing.T) {
	errs := parseErrors(t, `
policies:
  p: {algorithm: token_bucket, capacity: 10, rate: 1}
routes:
  - id: api
    match: {path: /api}
    upstream: http://127.0.0.1:8081
    limits:
      - {policy: p, key: "cookie:a b"}
      - {policy: p, key: [ip, "cookie:"]}
      - {policy: p, key: ip, plans: {from: cookies:plan, policies: {pro: p}}}
`, nil)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`test.yaml:9:26: routes[0].limits[0].key: key "cookie:a b": cookie name "a b" is not a valid cookie name (an RFC 6265 token)`,
		`test.yaml:10:31: routes[0].limits[1].key[1]: key "cookie:": cookie name is empty`,
		`test.yaml:11:44: routes[0].limits[2].plans.from: unknown key "cookies:plan" (allowed: header:NAME | query:NAME | ip | route | path | const:TEXT | cookie:NAME | client_cert:FIELD)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
