package config

import (
	"strings"
	"testing"
)

// TestWarningsHeadShadowed: GET in an earlier route's methods takes HEAD
// too, so a later route that lists HEAD and matches nothing the earlier one
// does not is reported, at its methods, naming the earlier route; routes
// the earlier one does not cover, and earlier routes that took HEAD before
// GET covered it, give no warning.
func TestWarningsHeadShadowed(t *testing.T) {
	const yaml = `
routes:
  - id: get
    match: {path: /r/*, methods: [GET], host: api.example, headers: {X-Tenant: a}, query: {v: ""}}
    respond: {body: ""}
  - id: head
    match: {path: /r/x, methods: [HEAD], host: API.example., headers: {x-tenant: a, X-Other: b}, query: {v: "2"}}
    respond: {body: ""}
  - id: head-post
    match: {path: /r/y, methods: [POST, HEAD], host: api.example, headers: {X-Tenant: a}, query: {v: "1"}}
    respond: {body: ""}
  - id: head-any-host
    match: {path: /r/x, methods: [HEAD]}
    respond: {body: ""}
  - id: head-deeper
    match: {path: /r/x/y, methods: [HEAD], host: api.example, headers: {X-Tenant: a}, query: {v: ""}}
    respond: {body: ""}
  - id: both
    match: {path: /s/**, methods: [GET, HEAD]}
    respond: {body: ""}
  - id: head-under-both
    match: {path: /s/x, methods: [HEAD]}
    respond: {body: ""}
`
	c, err := Parse("w.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range c.Warnings() {
		got = append(got, w.Error())
	}
	want := []string{
		`w.yaml:7:34: routes[1].match.methods: route "head" never matches: route "get" (routes[0] at line 3)`,
		`w.yaml:10:34: routes[2].match.methods: route "head-post" never sees a HEAD request: route "get" (routes[0] at line 3)`,
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d = %s\nwant it to start with %s", i, got[i], want[i])
		}
	}

	// A Config built in Go gets the same warnings, without positions.
	c = &Config{Routes: []Route{
		{ID: "get", Match: Match{Path: "/**", Methods: []string{"GET"}}, Respond: &Respond{}},
		{ID: "head", Match: Match{Path: "/x", Methods: []string{"HEAD"}}, Respond: &Respond{}},
	}}
	ApplyDefaults(c)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if ws := c.Warnings(); len(ws) != 1 || ws[0].Path != "routes[1].match.methods" || !strings.Contains(ws[0].Message, `route "head" never matches`) {
		t.Errorf("warnings of a Config built in Go = %v", ws)
	}
}
