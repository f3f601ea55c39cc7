package cli

import (
	"strings"
	"testing"
)

// TestEnvoyExampleChecks: examples/envoy/sluice.yaml, with the
// envoyproxy/ratelimit file it reads, passes `sluice check`.
func TestEnvoyExampleChecks(t *testing.T) {
	out, errOut, code := run("check", "--config", "../../../examples/envoy/sluice.yaml")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("sluice check examples/envoy/sluice.yaml: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
