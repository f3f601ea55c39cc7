package rls_test

import (
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/testkit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// updateERL records testdata/erl/golden.json from the envoyproxy/ratelimit
// binary that SLUICE_ERL_BINARY names (testdata/erl/README.md).
var updateERL = flag.Bool("update-erl", false, "record testdata/erl/golden.json from the envoyproxy/ratelimit binary in SLUICE_ERL_BINARY")

const erlGolden = "testdata/erl/golden.json"

// erlFiles are the envoyproxy/ratelimit files of the replay, and erlYAML
// the sluice configuration that loads them.
var erlFiles = map[string]string{"mixed.yaml": "testdata/erl/mixed.yaml", "ban.yaml": "testdata/erl/ban.yaml"}

const erlYAML = "rls: {listen: \"127.0.0.1:0\", envoy_config: [mixed.yaml, ban.yaml]}\n"

// erlStep is one call of testdata/erl/sequences.json.
type erlStep struct {
	Name        string          `json:"name"`
	Domain      string          `json:"domain"`
	HitsAddend  uint32          `json:"hits_addend,omitempty"`
	Descriptors []erlDescriptor `json:"descriptors"`
	// AllOrNothing marks a call that sluice denies as a whole while
	// envoyproxy/ratelimit still counts its descriptors that are within
	// their limits (docs/envoy.md): there sluice's limit_remaining is
	// envoyproxy/ratelimit's plus the descriptor's hits.
	AllOrNothing bool `json:"all_or_nothing,omitempty"`
}

// erlDescriptor is one descriptor of a step: "key=value" entries and its
// own hits_addend, if set.
type erlDescriptor struct {
	Entries    []string `json:"entries"`
	HitsAddend *uint64  `json:"hits_addend,omitempty"`
}

// erlAnswer is a service's answer to one step, as golden.json records it;
// durations are left out (they depend on the time of the call), only
// whether one was given is kept.
type erlAnswer struct {
	Name     string      `json:"name"`
	Overall  string      `json:"overall_code"`
	Statuses []erlStatus `json:"statuses"`
}

type erlStatus struct {
	Code      string    `json:"code"`
	Limit     *erlLimit `json:"current_limit,omitempty"`
	Remaining uint32    `json:"limit_remaining"`
	Reset     bool      `json:"has_duration_until_reset"`
}

type erlLimit struct {
	RequestsPerUnit uint32 `json:"requests_per_unit"`
	Unit            string `json:"unit"`
	Name            string `json:"name,omitempty"`
}

func loadJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// request builds the step's RateLimitRequest.
func (s *erlStep) request() *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: s.Domain, HitsAddend: s.HitsAddend}
	for _, d := range s.Descriptors {
		rd := &commonv3.RateLimitDescriptor{}
		for _, e := range d.Entries {
			k, v, _ := strings.Cut(e, "=")
			rd.Entries = append(rd.Entries, &commonv3.RateLimitDescriptor_Entry{Key: k, Value: v})
		}
		if d.HitsAddend != nil {
			rd.HitsAddend = wrapperspb.UInt64(*d.HitsAddend)
		}
		req.Descriptors = append(req.Descriptors, rd)
	}
	return req
}

// cost is descriptor i's hits, as both services count them.
func (s *erlStep) cost(i int) uint32 {
	if h := s.Descriptors[i].HitsAddend; h != nil {
		return uint32(*h)
	}
	return max(1, s.HitsAddend)
}

// answer calls the service with the step and records its answer.
func answer(t *testing.T, c rlsv3.RateLimitServiceClient, s *erlStep) erlAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, s.request())
	if err != nil {
		t.Fatalf("step %q: %v", s.Name, err)
	}
	a := erlAnswer{Name: s.Name, Overall: resp.GetOverallCode().String()}
	for _, st := range resp.GetStatuses() {
		es := erlStatus{Code: st.GetCode().String(), Remaining: st.GetLimitRemaining(), Reset: st.GetDurationUntilReset() != nil}
		if cl := st.GetCurrentLimit(); cl != nil {
			es.Limit = &erlLimit{RequestsPerUnit: cl.GetRequestsPerUnit(), Unit: cl.GetUnit().String(), Name: cl.GetName()}
		}
		a.Statuses = append(a.Statuses, es)
	}
	return a
}

// sluiceExpects returns what sluice answers to s, given erl, the answer
// of envoyproxy/ratelimit: the same, except that in an all-or-nothing step
// a descriptor envoyproxy/ratelimit counted within its limit was not
// counted by sluice.
func sluiceExpects(s *erlStep, erl erlAnswer) erlAnswer {
	want := erl
	want.Statuses = append([]erlStatus(nil), erl.Statuses...)
	if !s.AllOrNothing || erl.Overall != over.String() {
		return want
	}
	for i, st := range want.Statuses {
		if st.Code == ok.String() && st.Limit != nil && st.Remaining != math.MaxUint32 {
			want.Statuses[i].Remaining += s.cost(i)
		}
	}
	return want
}

// TestERLReplay replays testdata/erl/sequences.json against sluice loading
// testdata/erl's envoyproxy/ratelimit files and compares each answer with
// envoyproxy/ratelimit's, recorded in golden.json: the same codes, limits
// and remaining budgets, except where sluice is all-or-nothing.
// requests_per_unit 0 (a ban), quota_mode and a '*' inside a value were
// refused or read otherwise.
func TestERLReplay(t *testing.T) {
	var steps []erlStep
	loadJSON(t, "testdata/erl/sequences.json", &steps)
	var golden []erlAnswer
	loadJSON(t, erlGolden, &golden)
	if len(golden) != len(steps) {
		t.Fatalf("%s has %d answers for %d steps; record it again (testdata/erl/README.md)", erlGolden, len(golden), len(steps))
	}
	// Every unit's window starts at this instant (15330 days is a whole
	// number of years, months and weeks), as on a fresh envoyproxy/ratelimit.
	clock := kit.NewManualClock(time.Unix(15330*86400, 0).Add(time.Millisecond))
	in := start(t, erlYAML, erlFiles, gateway.Deps{Clock: clock})
	for i := range steps {
		s := &steps[i]
		if golden[i].Name != s.Name {
			t.Fatalf("golden answer %d is for %q, step is %q; record it again", i, golden[i].Name, s.Name)
		}
		got := answer(t, in.client, s)
		if d := cmp.Diff(sluiceExpects(s, golden[i]), got); d != "" {
			t.Errorf("step %d %q: sluice's answer differs from envoyproxy/ratelimit's (-want +got):\n%s", i, s.Name, d)
		}
	}
}

// TestERLLive runs when SLUICE_ERL_BINARY names an envoyproxy/ratelimit
// binary: it replays the sequences against that binary (on its own
// redis-server) and against sluice side by side, checks that the binary
// still answers as golden.json records (or records it, with
// -update-erl), and that sluice answers as it does.
func TestERLLive(t *testing.T) {
	bin := os.Getenv("SLUICE_ERL_BINARY")
	if bin == "" {
		t.Skip("SLUICE_ERL_BINARY is not set: no envoyproxy/ratelimit binary to compare with (testdata/erl/README.md)")
	}
	redistest.Require(t)
	rs := redistest.NewServer(t, redistest.ServerOptions{})
	erl := startERL(t, bin, rs.Addr())
	in := start(t, erlYAML, erlFiles, gateway.Deps{})
	var steps []erlStep
	loadJSON(t, "testdata/erl/sequences.json", &steps)

	// The minute windows must not turn over during the replay, which takes
	// well under a second: start early in a minute. Both services read the
	// wall clock, so this waits in real time.
	if now := time.Now(); now.Second() >= 45 {
		time.Sleep(now.Truncate(time.Minute).Add(time.Minute + time.Second).Sub(now))
	}
	began := time.Now().Truncate(time.Minute)
	recorded := make([]erlAnswer, len(steps))
	for i := range steps {
		s := &steps[i]
		recorded[i] = answer(t, erl, s)
		got := answer(t, in.client, s)
		if d := cmp.Diff(sluiceExpects(s, recorded[i]), got); d != "" {
			t.Errorf("step %d %q: sluice's answer differs from envoyproxy/ratelimit's (-want +got):\n%s", i, s.Name, d)
		}
	}
	if !time.Now().Truncate(time.Minute).Equal(began) {
		t.Fatal("the replay crossed a minute boundary, which resets the minute windows")
	}
	if *updateERL {
		data, err := json.MarshalIndent(recorded, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(erlGolden, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var golden []erlAnswer
	loadJSON(t, erlGolden, &golden)
	if d := cmp.Diff(golden, recorded); d != "" {
		t.Errorf("envoyproxy/ratelimit no longer answers as %s records (-golden +now):\n%s", erlGolden, d)
	}
}

// startERL starts the envoyproxy/ratelimit binary bin on loopback ports
// with testdata/erl's files and the Redis at redisAddr, and returns a
// client once it answers.
func startERL(t *testing.T, bin, redisAddr string) rlsv3.RateLimitServiceClient {
	t.Helper()
	root := t.TempDir()
	cfgDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range erlFiles {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ports := freePorts(t, 3)
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"USE_STATSD=false", "LOG_LEVEL=warn", "BACKEND_TYPE=redis",
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
		"HOST=127.0.0.1", "PORT=" + ports[0],
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + ports[1],
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + ports[2],
	}
	logPath := filepath.Join(root, "ratelimit.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	logs := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it may have exited
		<-exited
	})
	conn, err := grpc.NewClient("127.0.0.1:"+ports[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := rlsv3.NewRateLimitServiceClient(conn)
	probe := &erlStep{Name: "probe", Domain: "mixed", Descriptors: []erlDescriptor{{Entries: []string{"probe=1"}}}}
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.ShouldRateLimit(ctx, probe.request())
		cancel()
		if err == nil {
			return c
		}
		select {
		case werr := <-exited:
			exited <- werr
			t.Fatalf("%s exited (%v) before answering:\n%s", bin, werr, logs())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 60s (last: %v):\n%s", bin, err, logs())
		}
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for _, p := range testkit.FreePorts(t, n) {
		out = append(out, strconv.Itoa(p))
	}
	return out
}
