package core

import (
	"strings"
	"testing"
)

// TestSplitTargetFragment: a raw "#" anywhere in a target is errFragment;
// an escaped "%23" is a path byte.
func TestSplitTargetFragment(t *testing.T) {
	for _, target := range []string{"/login#1", "/login#", "#", "/a?x=1#y", "/a%2Fb#c", "http://h/a#b"} {
		if _, _, _, _, err := splitTarget(target); err != errFragment {
			t.Errorf("splitTarget(%q) error = %v, want errFragment", target, err)
		}
	}
	escaped, path, _, _, err := splitTarget("/tags/c%23")
	if err != nil || escaped != "/tags/c%23" || path != "/tags/c#" {
		t.Errorf(`splitTarget("/tags/c%%23") = %q, %q, %v; want the escape kept and "#" decoded`, escaped, path, err)
	}
	if d := targetDetail(errFragment); !strings.Contains(d, `request-target holds a raw "#"`) {
		t.Errorf("the detail %q does not name the request-target", d)
	}
}
