package gateway

import (
	"testing"

	"github.com/sluice-gw/sluice/httplimit"
)

func TestKeyText(t *testing.T) {
	k := httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User-Id"}, {Source: httplimit.SourcePath}}
	if got := keyText(k); got != "[header:X-User-Id, path]" {
		t.Errorf("keyText(%v) = %q, want [header:X-User-Id, path]", k, got)
	}
	if got := keyText(k[:1]); got != "header:X-User-Id" {
		t.Errorf("keyText(%v) = %q, want header:X-User-Id", k[:1], got)
	}
}
