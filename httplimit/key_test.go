package httplimit

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/internal/testdiff"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		spec    string
		want    KeyPart
		wantErr bool
	}{
		{"header:x-user-id", KeyPart{Source: SourceHeader, Name: "X-User-Id"}, false},
		{"header: X-Api-Key ", KeyPart{Source: SourceHeader, Name: "X-Api-Key"}, false},
		{"query:user", KeyPart{Source: SourceQuery, Name: "user"}, false},
		{"ip", KeyPart{Source: SourceIP, Name: ""}, false},
		{"route", KeyPart{Source: SourceRoute, Name: ""}, false},
		{"path", KeyPart{Source: SourcePath, Name: ""}, false},
		{"const:global", KeyPart{Source: SourceConst, Name: "global"}, false},
		{"const:a:b", KeyPart{Source: SourceConst, Name: "a:b"}, false},
		{"header:", KeyPart{}, true},
		{"header:X User", KeyPart{}, true},
		{"query:", KeyPart{}, true},
		{"const: ", KeyPart{}, true},
		{"ip:x", KeyPart{}, true},
		{"cookie:a", KeyPart{}, true},
		{"IP", KeyPart{}, true},
		{"", KeyPart{}, true},
	}
	for _, tt := range tests {
		got, err := ParseKey(tt.spec)
		if tt.wantErr {
			if !errors.Is(err, ErrInvalidKey) {
				t.Errorf("ParseKey(%q) = %v, %v; want ErrInvalidKey", tt.spec, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseKey(%q) = %v, %v; want %v", tt.spec, got, err, tt.want)
		}
		if back, err := ParseKey(got.String()); err != nil || back != got {
			t.Errorf("ParseKey(%q.String()) = %v, %v; want a round trip", got, back, err)
		}
	}
	if _, err := ParseKeys(nil); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("ParseKeys(nil) = %v, want ErrInvalidKey", err)
	}
	_, err := ParseKeys([]string{"ip", "bad", "cookie:x"})
	if err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("ParseKeys with two bad parts = %v, want both reported", err)
	}
}

func TestQueryValueMatchesParseQuery(t *testing.T) {
	for _, raw := range []string{
		"a=1&b=2", "b=&b=2", "a=%zz&a=ok", "%61=x", "a+b=c+d", "a;b=1&a=2", "a", "a=1=2", "&&a=3", "x=%20y%20",
	} {
		want := ""
		if v, _ := url.ParseQuery(raw); v != nil {
			want = v.Get("a")
		}
		if got := queryValue(raw, "a"); got != want {
			t.Errorf("queryValue(%q, a) = %q, url.ParseQuery gives %q", raw, got, want)
		}
	}
}

func FuzzQueryValue(f *testing.F) {
	f.Add("a=1&b=2", "a")
	f.Add("a%3Db=c;d", "a=b")
	f.Fuzz(func(t *testing.T, raw, name string) {
		v, _ := url.ParseQuery(raw)
		if got, want := queryValue(raw, name), v.Get(name); got != want {
			t.Errorf("queryValue(%q, %q) = %q, url.ParseQuery gives %q", raw, name, got, want)
		}
	})
}

func TestStateKey(t *testing.T) {
	if got, want := StateKey("api", "0", "per-user", []string{"u1"}), "3:api1:08:per-user2:u1"; got != want {
		t.Errorf("StateKey = %q, want %q", got, want)
	}
	if got, want := AnonymousStateKey("api", "0", "per-user"), "3:api1:08:per-user-"; got != want {
		t.Errorf("AnonymousStateKey = %q, want %q", got, want)
	}
	// Pairs that a naive separator-joined encoding would confuse.
	pairs := [][2][]string{
		{{"a", "b", "c", "d"}, {"a", "b", "c\x00d"}},
		{{"api", "0", "p", "x", "y"}, {"api", "0", "p", "x\x00y"}},
		{{"api", "0", "p", "1:x"}, {"api", "0", "p", "1", "x"}},
		{{"api", "0", "p", ""}, {"api", "0", "p"}},
		{{"ap", "i0", "p", "u"}, {"api", "0", "p", "u"}},
	}
	for _, p := range pairs {
		a, b := StateKey(p[0][0], p[0][1], p[0][2], p[0][3:]), StateKey(p[1][0], p[1][1], p[1][2], p[1][3:])
		if a == b {
			t.Errorf("%q and %q share the state key %q", p[0], p[1], a)
		}
	}
}

// decodeStateKey parses a state key back into its components; it is the
// proof that the encoding is injective.
func decodeStateKey(t *testing.T, k string) (fields []string, anonymous bool) {
	t.Helper()
	for k != "" {
		if k == string(anonymousMarker) {
			return fields, true
		}
		n, rest, ok := strings.Cut(k, ":")
		l, err := strconv.Atoi(n)
		if !ok || err != nil || l < 0 || l > len(rest) {
			t.Fatalf("undecodable state key tail %q", k)
		}
		fields, k = append(fields, rest[:l]), rest[l:]
	}
	return fields, false
}

// FuzzStateKey: a state key decodes to exactly what made it, and an
// anonymous key to its prefix alone, so no two inputs share a key and no
// key value reaches the anonymous budget.
func FuzzStateKey(f *testing.F) {
	f.Add("api", "0", "per-user", "u1", "-", uint8(2))
	f.Add("", "", "", "", "", uint8(0))
	f.Add("a:b", "1:", "3:x", "\x00", "0:", uint8(3))
	f.Fuzz(func(t *testing.T, route, id, policy, a, b string, n uint8) {
		parts := []string{a, b, a + b}[:n%4]
		want := append([]string{route, id, policy}, parts...)
		got, anon := decodeStateKey(t, StateKey(route, id, policy, parts))
		if anon || !testdiff.Equal(want, got) {
			t.Errorf("StateKey%q decodes to %q (anonymous %v)", want, got, anon)
		}
		got, anon = decodeStateKey(t, AnonymousStateKey(route, id, policy))
		if !anon || !testdiff.Equal(want[:3], got) {
			t.Errorf("AnonymousStateKey%q decodes to %q (anonymous %v)", want[:3], got, anon)
		}
	})
}
