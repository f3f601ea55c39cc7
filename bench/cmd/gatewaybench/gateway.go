package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/gateway/command"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// Environment variables that turn this binary into a gateway child (see
// runGatewayChild): the config file to serve and an optional CPU profile path.
const (
	childConfigEnv  = "GATEWAYBENCH_CHILD_CONFIG"
	childProfileEnv = "GATEWAYBENCH_CHILD_CPUPROFILE"
)

// runGatewayChild runs `sluice serve --config FILE` through gateway/command, the
// same code as gateway/cmd/sluice, optionally under the CPU profiler, and returns the
// exit code. It stops, and writes the profile, on SIGTERM.
func runGatewayChild(cfgPath, profPath string) int {
	if profPath != "" {
		f, err := os.Create(profPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gatewaybench child:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "gatewaybench child:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	return command.Run(context.Background(), []string{"serve", "--config", cfgPath}, os.Stdout, os.Stderr)
}

// limitsKind says which limits the benchmark route carries.
type limitsKind int

const (
	limitsNone   limitsKind = iota
	limitsAdmit             // two limits that admit everything
	limitsDeny50            // the same two limits; half the requests are on a plan that is always spent
)

// Policies of the benchmark route. per-user and global are far above what a
// run can spend, so they admit every request: the cells measure the cost of
// deciding, not of denying. spent admits one request per key, then about one
// per 11 days, so every free-plan request after a key's first is denied.
const policiesYAML = `policies:
  per-user: {algorithm: token_bucket, capacity: 1000000000, rate: 1000000}
  global:   {algorithm: fixed_window, limit: 1000000000000, window: 1h}
  spent:    {algorithm: token_bucket, capacity: 1, rate: 0.000001}
`

// gatewayConfig returns the YAML of a gateway on listen/admin that forwards
// /api/** to upstream with the given limits and store.
func gatewayConfig(listen, admin, upstream string, kind limitsKind, redisAddr string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server: {listen: %q}\nadmin: {listen: %q}\n", listen, admin)
	if redisAddr != "" {
		// A 1 s store timeout instead of the default 50 ms: on a loaded
		// machine a Redis call can wait longer than 50 ms for a core, and a
		// timed-out call is decided by the local fallback, which is not what
		// this cell measures. Fallbacks are still counted and reported.
		fmt.Fprintf(&b, "store:\n  type: redis\n  timeout: 1s\n  redis: {mode: standalone, addrs: [%q]}\n", redisAddr)
	} else {
		b.WriteString("store: {type: memory}\n")
	}
	b.WriteString(policiesYAML)
	fmt.Fprintf(&b, "routes:\n  - id: api\n    match: {path: /api/**}\n    upstream: http://%s\n", upstream)
	switch kind {
	case limitsAdmit:
		b.WriteString("    limits:\n      - {policy: per-user, key: header:X-User-Id}\n      - {policy: global, key: const:global}\n")
	case limitsDeny50:
		b.WriteString("    limits:\n      - {policy: per-user, key: header:X-User-Id, plans: {from: header:X-Plan, policies: {free: spent}}}\n      - {policy: global, key: const:global}\n")
	}
	return b.String()
}

// gatewayProc is a running gateway child process.
type gatewayProc struct {
	addr, admin string // host:port of the public and admin listeners
	p           *sluicetest.Proc
}

// gatewaySpec says how to start a gateway.
type gatewaySpec struct {
	sluice  string // sluice binary; "" runs this binary as a gateway child
	procs   int    // GOMAXPROCS of the gateway process
	dir     string // where config files go
	name    string // file name stem for the config and profile
	profile bool   // write a CPU profile into dir (child mode only)
}

// startGateway writes a config from build (given listen and admin
// addresses on port 0, which the gateway's log then names), starts the
// gateway and waits until /readyz answers 200.
func startGateway(ctx context.Context, spec gatewaySpec, build func(listen, admin string) string) (*gatewayProc, error) {
	cfgPath := filepath.Join(spec.dir, spec.name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(build("127.0.0.1:0", "127.0.0.1:0")), 0o644); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	env := append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(spec.procs))
	bin, args := spec.sluice, []string{"serve", "--config", cfgPath}
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find this binary: %w", err)
		}
		bin, args = self, nil
		env = append(env, childConfigEnv+"="+cfgPath)
		if spec.profile {
			env = append(env, childProfileEnv+"="+filepath.Join(spec.dir, spec.name+".pprof"))
		}
	}
	p, err := sluicetest.Start(bin, sluicetest.Options{Args: args, Env: env, MaxLog: 64 << 10, StartTimeout: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	g := &gatewayProc{addr: strings.TrimPrefix(p.Base, "http://"), admin: strings.TrimPrefix(p.Admin, "http://"), p: p}
	if err := g.waitReady(ctx, 10*time.Second); err != nil {
		g.stop()
		return nil, fmt.Errorf("gateway on %s: %w; its log:\n%s", g.addr, err, p.Logs())
	}
	return g, nil
}

// waitReady polls the admin /readyz every 20ms until 200, the process
// exits, or timeout.
func (g *gatewayProc) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + g.admin + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %s", resp.Status)
		}
		select {
		case <-g.p.Exited():
			return fmt.Errorf("gateway exited (code %d) before it was ready", g.p.ExitCode())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %w", timeout, err)
		}
	}
}

// cpu returns the CPU time the gateway process has used so far.
func (g *gatewayProc) cpu() (time.Duration, bool) { return benchproc.ProcessCPU(g.p.PID()) }

// storeTrouble returns the gateway's store errors plus fallback
// decisions (see benchproc.StoreTrouble).
func (g *gatewayProc) storeTrouble() (float64, error) { return benchproc.StoreTrouble(g.admin) }

// stop sends SIGTERM (drain and exit; the child writes its profile), then
// SIGKILL after 10 s, and waits for the process.
func (g *gatewayProc) stop() { g.p.Stop(10 * time.Second) }
