package core

import "testing"

func TestHasQueryValue(t *testing.T) {
	for _, tc := range []struct {
		raw, name, want string
		ok              bool
	}{
		{"q=1", "q", "", true},
		{"q", "q", "", true},
		{"q=", "q", "", true},
		{"a=1&b=2", "q", "", false},
		{"lang=fr&lang=en", "lang", "en", true},
		{"lang=fr", "lang", "en", false},
		{"l%61ng=e%6E", "lang", "en", true},
		{"lang=a+b", "lang", "a b", true},
		{"lang=%zz&lang=en", "lang", "en", true},
		{"lang=%zz", "lang", "%zz", false},
		{"x;lang=en", "lang", "en", false},
		{"", "q", "", false},
	} {
		if got := hasQueryValue(tc.raw, tc.name, tc.want); got != tc.ok {
			t.Errorf("hasQueryValue(%q, %q, %q) = %v, want %v", tc.raw, tc.name, tc.want, got, tc.ok)
		}
	}
}
