package rls

import (
	"strings"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FuzzUnmarshalRequest: unmarshalRequest decodes every message the
// protobuf runtime decodes to an equal RateLimitRequest, and accepts one
// the runtime refuses only for a string that is not UTF-8.
func FuzzUnmarshalRequest(f *testing.F) {
	full := &rlsv3.RateLimitRequest{Domain: "api", HitsAddend: 3, Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "user", Value: "u1"}, {Key: "path", Value: "/x"}},
			HitsAddend: wrapperspb.UInt64(2), IsNegativeHits: true,
			Limit: &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5}},
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "tenant"}}},
	}}
	b, err := proto.Marshal(full)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{})
	entry := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "\xff")
	entry = protowire.AppendString(protowire.AppendTag(entry, 1, protowire.BytesType), "user")
	desc := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)
	desc = protowire.AppendVarint(protowire.AppendTag(desc, 9, protowire.VarintType), 7) // unknown
	req := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), desc)
	req = protowire.AppendVarint(protowire.AppendTag(req, 1, protowire.VarintType), 1) // domain, wrong wire type
	f.Add(protowire.AppendString(protowire.AppendTag(req, 1, protowire.BytesType), "api"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got rlsv3.RateLimitRequest
		werr := proto.Unmarshal(b, &want)
		gerr := unmarshalRequest(b, &got)
		switch {
		case werr == nil && gerr != nil:
			t.Fatalf("unmarshalRequest(%x) = %v; proto.Unmarshal decodes it", b, gerr)
		case werr == nil && !proto.Equal(&got, &want):
			t.Fatalf("unmarshalRequest(%x) = %v, proto.Unmarshal = %v", b, &got, &want)
		case werr != nil && gerr == nil && !strings.Contains(werr.Error(), "invalid UTF-8"):
			// The runtime's error is not typed: its text is all there is.
			t.Fatalf("unmarshalRequest(%x) = %v; proto.Unmarshal refuses it for more than UTF-8: %v", b, &got, werr)
		}
	})
}
