package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// Names of the domain and descriptor keys of the benchmark's configuration.
const (
	domain   = "bench"
	userKey  = "user"  // one budget per value, far above what a run spends
	checkKey = "check" // the correctness check's key, limited to K per minute
)

// userLimit is the per-minute limit of every user value: no run comes near
// it, so the load measures the cost of admitting.
const userLimit = 1_000_000_000

// envoyConfig returns the envoyproxy/ratelimit configuration file both
// servers read: a per-user limit for the load and a limit of checkLimit per
// minute for the correctness check.
func envoyConfig(checkLimit int) string {
	return fmt.Sprintf(`domain: %s
descriptors:
  - key: %s
    rate_limit:
      unit: minute
      requests_per_unit: %d
  - key: %s
    rate_limit:
      unit: minute
      requests_per_unit: %d
`, domain, userKey, userLimit, checkKey, checkLimit)
}

// Where the envoyproxy/ratelimit file lives under the run's directory:
// envoyproxy/ratelimit reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml
// when RUNTIME_WATCH_ROOT is false, and sluice's envoy_config names the same
// file.
const (
	runtimeSubdir = "ratelimit"
	envoyFile     = runtimeSubdir + "/config/bench.yaml"
)

// sluiceConfig returns the YAML of a sluice that serves only the rate limit
// service on rlsAddr, on the standalone Redis at redisAddr, with the
// domains of the envoyproxy/ratelimit file at envoyFile (relative to the
// YAML file's directory).
func sluiceConfig(rlsAddr, redisAddr string) string {
	// A 1 s store timeout instead of the default 50 ms, as envoyproxy/
	// ratelimit waits for Redis too: on a loaded machine a call can wait
	// longer than 50 ms for a core, and a timed-out call would be decided by
	// the local fallback, which is not what the cell measures. Store trouble
	// is counted and reported.
	return fmt.Sprintf(`server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
store:
  type: redis
  timeout: 1s
  redis: {mode: standalone, addrs: [%q]}
rls:
  listen: %q
  envoy_config: [%s]
`, redisAddr, rlsAddr, envoyFile)
}

// ratelimitEnv returns the environment of envoyproxy/ratelimit: every
// listener on 127.0.0.1 (gRPC on grpcPort), the standalone Redis at
// redisAddr over TCP, the configuration under root, no statsd, warnings
// only.
func ratelimitEnv(root, redisAddr string, grpcPort, httpPort, debugPort int) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(httpPort),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(grpcPort),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(debugPort),
		"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=SINGLE", "REDIS_URL=" + redisAddr,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=" + runtimeSubdir, "RUNTIME_WATCH_ROOT=false",
		"USE_STATSD=false", "LOG_LEVEL=warn",
	}
}

// writeConfigs writes the envoyproxy/ratelimit file and sluice's YAML into
// dir and returns the YAML's path.
func writeConfigs(dir string, checkLimit int, rlsAddr, redisAddr string) (string, error) {
	ef := filepath.Join(dir, envoyFile)
	if err := os.MkdirAll(filepath.Dir(ef), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(ef, []byte(envoyConfig(checkLimit)), 0o644); err != nil {
		return "", err
	}
	sf := filepath.Join(dir, "sluice.yaml")
	return sf, os.WriteFile(sf, []byte(sluiceConfig(rlsAddr, redisAddr)), 0o644)
}

// target is a running rate limit service and a client of it.
type target struct {
	name   string
	proc   *sluicetest.Proc
	admin  string // sluice's admin listener, host:port; "" for the peer
	client rlsv3.RateLimitServiceClient
	conn   *grpc.ClientConn
}

// pid returns the server's process id.
func (t *target) pid() int { return t.proc.PID() }

// stop closes the client and stops the server by its PID.
func (t *target) stop() {
	if t.conn != nil {
		t.conn.Close()
	}
	t.proc.Stop(5 * time.Second)
}

// storeTrouble returns sluice's store errors plus fallback decisions so far
// (benchproc.StoreTrouble), or 0 for the peer, which has no such metric.
func (t *target) storeTrouble() (float64, error) {
	if t.admin == "" {
		return 0, nil
	}
	return benchproc.StoreTrouble(t.admin)
}

// startSluice runs `bin serve --config cfgPath`, whose rate limit service
// listens on rlsAddr, and waits until it decides a call.
func startSluice(ctx context.Context, bin, cfgPath, rlsAddr string) (*target, error) {
	p, err := sluicetest.Start(bin, sluicetest.Options{Args: []string{"serve", "--config", cfgPath}, MaxLog: 64 << 10, StartTimeout: 15 * time.Second})
	if err != nil {
		return nil, err
	}
	t := &target{name: "sluice", proc: p, admin: strings.TrimPrefix(p.Admin, "http://")}
	if err := t.connect(ctx, rlsAddr); err != nil {
		t.stop()
		return nil, fmt.Errorf("sluice: %w\n%s", err, p.Logs())
	}
	return t, nil
}

// startRatelimit runs envoyproxy/ratelimit with env in dir and waits until
// it decides a call on the gRPC port.
func startRatelimit(ctx context.Context, bin, dir string, env []string, grpcAddr string) (*target, error) {
	p, err := sluicetest.StartProgram(bin, sluicetest.Options{Dir: dir, Env: env, MaxLog: 64 << 10})
	if err != nil {
		return nil, err
	}
	t := &target{name: "envoyproxy/ratelimit", proc: p}
	if err := t.connect(ctx, grpcAddr); err != nil {
		t.stop()
		return nil, fmt.Errorf("envoyproxy/ratelimit: %w\n%s", err, p.Logs())
	}
	return t, nil
}

// connect dials addr and polls, for up to 15 seconds, until a call on the
// benchmark's domain comes back with the user limit: the server listens and
// has loaded the configuration.
func (t *target) connect(ctx context.Context, addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	t.conn, t.client = conn, rlsv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req := request(domain, userKey, "ready-probe")
	var last error
	for {
		if isExited(t.proc) {
			return fmt.Errorf("exited before it was ready")
		}
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		resp, err := t.client.ShouldRateLimit(cctx, req)
		ccancel()
		switch {
		case err != nil:
			last = err
		case len(resp.GetStatuses()) == 1 && resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == userLimit:
			return nil
		default:
			last = fmt.Errorf("answer without the configured limit: %v", resp)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready within 15s: %v", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// isExited reports whether p has exited.
func isExited(p *sluicetest.Proc) bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}

// freeAddr returns 127.0.0.1:PORT with a port that is free now, below the
// ephemeral range (redistest.FreePort).
func freeAddr() (string, int, error) {
	p, err := redistest.FreePort()
	if err != nil {
		return "", 0, err
	}
	return "127.0.0.1:" + strconv.Itoa(p), p, nil
}

// binaryVersion describes the Go binary at path from its build
// information: module version, VCS revision (and "+dirty" when modified)
// and Go version.
func binaryVersion(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	out := bi.Main.Path + " " + bi.Main.Version
	if rev != "" {
		out += ", commit " + rev + modified
	}
	return out + ", " + bi.GoVersion
}
