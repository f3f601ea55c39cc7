package rls_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/ratelimit"
)

// panickingStore panics on every decision, as a store with a bug would.
type panickingStore struct{}

func (panickingStore) Evaluate(context.Context, []ratelimit.Request, []ratelimit.Decision) (bool, error) {
	panic("test: the store panics")
}
func (panickingStore) Peek(context.Context, []ratelimit.Request, []ratelimit.Decision) error {
	panic("test: the store panics")
}
func (panickingStore) Reset(context.Context, []ratelimit.Request) error { return nil }

// TestPanicIsInternal: a call whose decision panics is
// answered INTERNAL and counted in sluice_panics_total{door="rls"}; the
// service keeps serving.
func TestPanicIsInternal(t *testing.T) {
	in := start(t, ownConfig, nil, gateway.Deps{Store: panickingStore{}})
	for i := range 2 {
		_, err := in.ask("api", 0, desc("user", "u1"))
		if status.Code(err) != codes.Internal {
			t.Fatalf("call %d with a panicking store: %v, want INTERNAL", i+1, err)
		}
	}
	if r := in.call(t, "elsewhere", desc("user", "u1")); r.OverallCode != ok {
		t.Errorf("a call after the panics = %v, want OK (an unknown domain)", r.OverallCode)
	}
	_, m := in.adminDo(t, "GET", "/metrics", "")
	if !strings.Contains(m, `sluice_panics_total{door="rls"} 2`) {
		t.Errorf("metrics lack sluice_panics_total{door=\"rls\"} 2:\n%s", grepLines(m, "sluice_panics"))
	}
}
