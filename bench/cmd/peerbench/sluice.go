package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// sluiceLimits says which limits the sluice route carries.
type sluiceLimits int

const (
	sluiceNoLimits sluiceLimits = iota
	sluiceAdmit                 // per-user token bucket + global fixed window, admitting everything
)

// sluicePolicies are far above what a run can spend, so they admit every
// request: the cells measure the cost of deciding, not of denying.
const sluicePolicies = `policies:
  per-user: {algorithm: token_bucket, capacity: 1000000000, rate: 1000000}
  global:   {algorithm: fixed_window, limit: 1000000000000, window: 1h}
`

// sluiceConfig returns the YAML of a gateway listening on free loopback
// ports that forwards /api/** to upstream, with the given limits, on the
// memory store or, when redisAddr is not empty, on a standalone Redis.
func sluiceConfig(upstream string, limits sluiceLimits, redisAddr string) string {
	var b strings.Builder
	b.WriteString("server: {listen: \"127.0.0.1:0\"}\nadmin: {listen: \"127.0.0.1:0\"}\n")
	if redisAddr != "" {
		// A 1 s store timeout instead of the default 50 ms: on a loaded
		// machine a Redis call can wait longer than 50 ms for a core, and a
		// timed-out call is decided by the local fallback, which is not what
		// the cell measures. Fallbacks are counted and reported.
		fmt.Fprintf(&b, "store:\n  type: redis\n  timeout: 1s\n  redis: {mode: standalone, addrs: [%q]}\n", redisAddr)
	} else {
		b.WriteString("store: {type: memory}\n")
	}
	b.WriteString(sluicePolicies)
	fmt.Fprintf(&b, "routes:\n  - id: api\n    match: {path: /api/**}\n    upstream: http://%s\n", upstream)
	if limits == sluiceAdmit {
		b.WriteString("    limits:\n      - {policy: per-user, key: header:X-User-Id}\n      - {policy: global, key: const:global}\n")
	}
	return b.String()
}

// sluiceProc is a running sluice gateway.
type sluiceProc struct {
	p           *sluicetest.Proc
	addr, admin string // host:port of the public and admin listeners
}

// startSluice writes the config into dir as name.yaml and runs
// `bin serve --config FILE`.
func startSluice(bin, dir, name, config string) (*sluiceProc, error) {
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return nil, fmt.Errorf("write sluice config: %w", err)
	}
	p, err := sluicetest.Start(bin, sluicetest.Options{Args: []string{"serve", "--config", path}, MaxLog: 64 << 10, StartTimeout: 15 * time.Second})
	if err != nil {
		return nil, err
	}
	return &sluiceProc{p: p, addr: strings.TrimPrefix(p.Base, "http://"), admin: strings.TrimPrefix(p.Admin, "http://")}, nil
}

// storeTrouble returns the gateway's store errors plus fallback
// decisions (see benchproc.StoreTrouble).
func (s *sluiceProc) storeTrouble() (float64, error) { return benchproc.StoreTrouble(s.admin) }
