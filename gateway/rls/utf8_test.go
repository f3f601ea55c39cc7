package rls_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-gw/sluice/gateway"
)

// rawCodec sends a request as the protobuf bytes it is given (a *[]byte)
// and decodes the answer with grpc's proto codec: a client that can send
// what the generated client's marshalling refuses, as Envoy does.
type rawCodec struct{}

func (rawCodec) Name() string { return grpcproto.Name }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, errors.New("rawCodec: want *[]byte")
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(grpcproto.Name).Unmarshal(data, v)
}

// rawRequest encodes a RateLimitRequest for domain with one descriptor of
// the key, value pairs kv, byte for byte.
func rawRequest(domain string, kv ...string) []byte {
	var desc []byte
	for i := 0; i+1 < len(kv); i += 2 {
		entry := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), kv[i])
		entry = protowire.AppendString(protowire.AppendTag(entry, 2, protowire.BytesType), kv[i+1])
		desc = protowire.AppendBytes(protowire.AppendTag(desc, 1, protowire.BytesType), entry)
	}
	req := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), domain)
	return protowire.AppendBytes(protowire.AppendTag(req, 2, protowire.BytesType), desc)
}

// TestInvalidUTF8IsLimited: a descriptor value that is
// not UTF-8, as Envoy copies a client's header byte for byte, is decided
// like any other: OK until the key's budget is spent, then OVER_LIMIT, not
// INTERNAL (which Envoy's default failure_mode_deny: false admits). It keys
// as bytes: another invalid value, which a UTF-8 repair would fold into the
// same U+FFFD, has a budget of its own.
func TestInvalidUTF8IsLimited(t *testing.T) {
	in := start(t, ownConfig, nil, gateway.Deps{})
	conn, err := grpc.NewClient(in.srv.RLSAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ask := func(value string) rlsv3.RateLimitResponse_Code {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := rawRequest("api", "user", value)
		var resp rlsv3.RateLimitResponse
		if err := conn.Invoke(ctx, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &req, &resp, grpc.ForceCodecV2(rawCodec{})); err != nil {
			t.Fatalf("ShouldRateLimit(user=%q): %v, want an answer", value, err)
		}
		return resp.GetOverallCode()
	}
	for i := range 5 { // per-user: capacity 5
		if got := ask("\xff"); got != ok {
			t.Fatalf("call %d for user=\\xff = %v, want OK", i+1, got)
		}
	}
	if got := ask("\xff"); got != over {
		t.Errorf("6th call for user=\\xff = %v, want OVER_LIMIT", got)
	}
	if got := ask("\xfe"); got != ok {
		t.Errorf("first call for user=\\xfe = %v, want OK: a key of its own", got)
	}
	if got := ask("\xef\xbf\xbd"); got != ok {
		t.Errorf("first call for user=U+FFFD = %v, want OK: a key of its own", got)
	}
}
