package rls

import (
	"errors"
	"fmt"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// codec is the rate limit service's gRPC codec: grpc's proto codec, except
// that a RateLimitRequest is decoded without checking that its strings
// (the domain, and each descriptor entry's key and value) are valid UTF-8.
//
// The protobuf runtime refuses a proto3 string field that is not UTF-8, and
// has no option to accept one; Envoy copies request headers into
// descriptor values byte for byte, so a client sending a header value with
// a byte such as 0xff would get its call refused with INTERNAL, which Envoy
// (failure_mode_deny: false, its default) admits: the client would opt out
// of limiting. Decoded here, the strings hold the bytes as sent and key as
// bytes, as the gateway's header keys do (docs/envoy.md).
type codec struct {
	proto encoding.CodecV2
}

var _ encoding.CodecV2 = codec{}

// newCodec returns the codec, on grpc's registered proto codec.
func newCodec() codec {
	return codec{proto: encoding.GetCodecV2(grpcproto.Name)}
}

func (c codec) Name() string { return c.proto.Name() }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*rlsv3.RateLimitRequest)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	proto.Reset(req)
	return unmarshalRequest(buf.ReadOnlyData(), req)
}

// The field numbers of the string-bearing fields (envoy/service/ratelimit/v3/rls.proto and
// envoy/extensions/common/ratelimit/v3/ratelimit.proto).
const (
	fieldDomain      protowire.Number = 1 // RateLimitRequest.domain
	fieldDescriptors protowire.Number = 2 // RateLimitRequest.descriptors
	fieldEntries     protowire.Number = 1 // RateLimitDescriptor.entries
	fieldKey         protowire.Number = 1 // RateLimitDescriptor.Entry.key
	fieldValue       protowire.Number = 2 // RateLimitDescriptor.Entry.value
)

// errMalformed is a request that is not valid protobuf.
var errMalformed = errors.New("rls: malformed RateLimitRequest")

// unmarshalRequest decodes b into req, which is empty: the domain and the
// descriptors by hand, every other field by the protobuf runtime, so that
// a message with valid UTF-8 decodes exactly as proto.Unmarshal decodes it
// (FuzzUnmarshalRequest).
func unmarshalRequest(b []byte, req *rlsv3.RateLimitRequest) error {
	return split(b, req, func(num protowire.Number, v []byte) (bool, error) {
		switch num {
		case fieldDomain:
			req.Domain = string(v)
		case fieldDescriptors:
			d := &commonv3.RateLimitDescriptor{}
			if err := split(v, d, func(num protowire.Number, v []byte) (bool, error) {
				if num != fieldEntries {
					return false, nil
				}
				e := &commonv3.RateLimitDescriptor_Entry{}
				err := split(v, e, func(num protowire.Number, v []byte) (bool, error) {
					switch num {
					case fieldKey:
						e.Key = string(v)
					case fieldValue:
						e.Value = string(v)
					default:
						return false, nil
					}
					return true, nil
				})
				d.Entries = append(d.Entries, e)
				return true, err
			}); err != nil {
				return false, err
			}
			req.Descriptors = append(req.Descriptors, d)
		default:
			return false, nil
		}
		return true, nil
	})
}

// split decodes the message b into m: take is offered each
// length-delimited field's number and contents, and reports whether it
// decoded it; the fields it leaves (and those of other wire types) are
// merged into m by the protobuf runtime, in their order.
func split(b []byte, m proto.Message, take func(protowire.Number, []byte) (bool, error)) error {
	var rest []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errMalformed, protowire.ParseError(n))
		}
		size := protowire.ConsumeFieldValue(num, typ, b[n:])
		if size < 0 {
			return fmt.Errorf("%w: %w", errMalformed, protowire.ParseError(size))
		}
		field := b[:n+size]
		b = b[n+size:]
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(field[n:])
			took, err := take(num, v)
			if err != nil {
				return err
			}
			if took {
				continue
			}
		}
		rest = append(rest, field...)
	}
	if len(rest) == 0 {
		return nil
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(rest, m); err != nil {
		return fmt.Errorf("%w: %w", errMalformed, err)
	}
	return nil
}
