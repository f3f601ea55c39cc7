package admin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFieldRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		route string
		parts []string
	}{
		{"api", []string{"u1"}},
		{"a", []string{"", "x:y", "3:abc"}},
		{"r", []string{"{\x00}", "ü"}},
	} {
		f := Field(tc.route, tc.parts)
		route, parts, ok := ParseField(f)
		if !ok || route != tc.route || !cmp.Equal(parts, tc.parts) {
			t.Errorf("parse(%q) = %q, %q, %v; want %q, %q", f, route, parts, ok, tc.route, tc.parts)
		}
	}
	for _, bad := range []string{"", "3:api", "x:y", "9:ab", "3:api2:u"} {
		if _, _, ok := ParseField(bad); ok {
			t.Errorf("parse(%q) ok, want malformed", bad)
		}
	}
}
