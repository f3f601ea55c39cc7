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
	return sluiceConfigTLS(upstream, limits, redisAddr, nil)
}

// sluiceTLS is what a sluice TLS cell adds to the config.
type sluiceTLS struct {
	listen            string // the HTTPS listener's host:port
	certFile, keyFile string
}

// sluiceConfigTLS is sluiceConfig, and with t the gateway also serves
// HTTPS on t.listen (server.tls: TLS 1.3 only, t's certificate; HTTP/2 and
// HTTP/1.1 by ALPN, at most goProxyMaxStreams streams at once per
// connection) and the per-user limit is keyed on the userQuery query
// parameter instead of X-User-Id (the TLS cells carry the user there).
func sluiceConfigTLS(upstream string, limits sluiceLimits, redisAddr string, t *sluiceTLS) string {
	var b strings.Builder
	if t == nil {
		b.WriteString("server: {listen: \"127.0.0.1:0\"}\n")
	} else {
		fmt.Fprintf(&b, `server:
  listen: "127.0.0.1:0"
  tls:
    listen: %q
    certificates:
      - cert_file: %q
        key_file: %q
    min_version: "1.3"
  http2:
    max_concurrent_streams: %d
`, t.listen, t.certFile, t.keyFile, goProxyMaxStreams)
	}
	b.WriteString("admin: {listen: \"127.0.0.1:0\"}\n")
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
		userKey := "header:X-User-Id"
		if t != nil {
			userKey = "query:" + userQuery
		}
		fmt.Fprintf(&b, "    limits:\n      - {policy: per-user, key: %s}\n      - {policy: global, key: const:global}\n", userKey)
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
