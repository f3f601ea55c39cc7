package rls_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/gatewaytest"
)

// instance is one sluice serving the rate limit service on loopback.
type instance struct {
	client rlsv3.RateLimitServiceClient
	admin  string // base URL of the admin listener
	srv    *gateway.Server
}

const adminToken = "test-token"

// start writes yaml (with "RLS: " standing for the rls section's listen
// fields) as sluice.yaml in a temp dir next to copies of files, loads it
// and serves it with deps on free loopback ports.
func start(t *testing.T, yaml string, files map[string]string, deps gateway.Deps) *instance {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	head := "server: {listen: \"127.0.0.1:0\"}\nadmin: {listen: \"127.0.0.1:0\", token: " + adminToken + "}\n"
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(head+yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	srv := gatewaytest.Start(t, gatewaytest.New(t, cfg, deps))
	conn, err := grpc.NewClient(srv.RLSAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &instance{client: rlsv3.NewRateLimitServiceClient(conn), admin: "http://" + srv.AdminAddr().String(), srv: srv}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *commonv3.RateLimitDescriptor {
	d := &commonv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// hits sets a descriptor's own hits_addend.
func hits(d *commonv3.RateLimitDescriptor, n uint64) *commonv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// call asks ShouldRateLimit and fails the test on an error.
func (in *instance) call(t *testing.T, domain string, ds ...*commonv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := in.ask(domain, 0, ds...)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%s): %v", domain, err)
	}
	return resp
}

// ask calls ShouldRateLimit with the request-level hits_addend n.
func (in *instance) ask(domain string, n uint32, ds ...*commonv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return in.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: n})
}

// header returns the value of response header name in resp, or "".
func header(resp *rlsv3.RateLimitResponse, name string) string {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetKey(), name) {
			return h.GetValue()
		}
	}
	return ""
}

// adminDo calls the admin API and returns the status and body.
func (in *instance) adminDo(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, in.admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
