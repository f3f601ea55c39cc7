package httplimit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
)

// session is a key part computed from the request: the X-Session header's
// text after "s=", as a cookie source would compute it.
var session = FuncKeyPart("session:s", func(r Request) string {
	_, v, _ := strings.Cut(r.Header("X-Session"), "s=")
	return v
})

// TestFuncKeyPart: a computed part keys budgets like a built-in one, its
// value trimmed, and an empty value makes the key empty, so that
// OnEmptyKey applies.
func TestFuncKeyPart(t *testing.T) {
	two := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "two", Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Hour})
	for _, tt := range []struct {
		onEmpty EmptyKey
		codes   []int // of a, a, a, none, none, none, blank
		keys    [][]string
	}{
		{EmptyKeyDeny, []int{200, 200, 429, 403, 403, 403, 403}, [][]string{{"a"}, {"a"}, {"a"}}},
		{EmptyKeyAnonymous, []int{200, 200, 429, 200, 200, 429, 429}, [][]string{{"a"}, {"a"}, {"a"}, nil, nil, nil, nil}},
		{EmptyKeySkip, []int{200, 200, 429, 200, 200, 200, 200}, [][]string{{"a"}, {"a"}, {"a"}}},
	} {
		t.Run(tt.onEmpty.String(), func(t *testing.T) {
			f := newFixture(t, Options{Limits: []Limit{{Policy: two, Key: Key{session}, OnEmptyKey: tt.onEmpty}}})
			var codes []int
			for _, h := range []string{"X-Session: s= a ", "X-Session: s=a", "X-Session: s=a", "X-Other: 1", "X-Session: none", "X-Session: s=", "X-Session: s=   "} {
				codes = append(codes, f.do("/", h).Code)
			}
			if !equalInts(codes, tt.codes) {
				t.Errorf("codes %v, want %v", codes, tt.codes)
			}
			var keys [][]string
			for _, ev := range f.events {
				for _, v := range ev.Verdicts {
					keys = append(keys, v.Key)
				}
			}
			if len(keys) != len(tt.keys) {
				t.Fatalf("verdict keys %q, want %q", keys, tt.keys)
			}
			for i := range keys {
				if strings.Join(keys[i], ",") != strings.Join(tt.keys[i], ",") {
					t.Errorf("verdict %d key %q, want %q", i, keys[i], tt.keys[i])
				}
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFuncKeyPartText: a computed part is written as its spec, and New
// refuses one without a spec or a function.
func TestFuncKeyPartText(t *testing.T) {
	if got := (Key{session, {Source: SourceIP}}).String(); got != "session:s,ip" {
		t.Errorf("String = %q, want session:s,ip", got)
	}
	if b, err := session.MarshalText(); err != nil || string(b) != "session:s" {
		t.Errorf("MarshalText = %q, %v; want session:s", b, err)
	}
	if session == FuncKeyPart("session:s", nil) {
		t.Error("two FuncKeyPart results compare equal")
	}
	if c := session; c != session || !testdiff.Equal(Key{c}, Key{session}) {
		t.Error("a copy of a FuncKeyPart differs from it")
	}
	if !session.Equal(FuncKeyPart("session:s", nil)) || session.Equal(FuncKeyPart("session:t", session.fn.value)) {
		t.Error("Equal does not compare FuncKeyPart parts by name")
	}
	if (KeyPart{Source: SourceHeader, Name: "A"}).Equal(KeyPart{Source: SourceQuery, Name: "A"}) {
		t.Error("Equal ignores the source")
	}
	store := newTestStore(t, nil)
	for _, kp := range []KeyPart{FuncKeyPart(" ", session.fn.value), FuncKeyPart("x", nil), {Source: SourceFunc, Name: "x"}} {
		_, err := New(Options{Store: store, Limits: []Limit{{Policy: perUser, Key: Key{kp}}}})
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New with key part %q: error %v, want ErrInvalidOptions", kp.Name, err)
		}
		if _, err := kp.MarshalText(); err == nil {
			t.Errorf("MarshalText of invalid part %q succeeded", kp.Name)
		}
	}
}

// TestFuncKeyPartPlans: a computed part can choose the plan.
func TestFuncKeyPartPlans(t *testing.T) {
	f := newFixture(t, Options{Limits: []Limit{{
		Policy: perUser, Key: mustKey(t, "const:all"),
		Plans: &Plans{From: session, Policies: map[string]*ratelimit.Policy{"pro": pro}},
	}}})
	f.do("/", "X-Session: s=pro")
	f.do("/", "X-Session: s=free")
	var got []string
	for _, ev := range f.events {
		got = append(got, ev.Verdicts[0].Policy.Name())
	}
	if strings.Join(got, " ") != "pro-tier per-user" {
		t.Errorf("policies %q, want pro-tier then per-user", got)
	}
}
