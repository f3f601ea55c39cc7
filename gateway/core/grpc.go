package core

import "strings"

// The gRPC status codes the gateway answers with (the gRPC status codes'
// numbers and names).
const (
	GRPCUnknown           = 2
	GRPCDeadlineExceeded  = 4
	GRPCPermissionDenied  = 7
	GRPCResourceExhausted = 8
	GRPCUnimplemented     = 12
	GRPCInternal          = 13
	GRPCUnavailable       = 14
	GRPCUnauthenticated   = 16
)

// grpcNames are the names of the codes GRPCStatus returns.
var grpcNames = map[int]string{
	GRPCUnknown:           "UNKNOWN",
	GRPCDeadlineExceeded:  "DEADLINE_EXCEEDED",
	GRPCPermissionDenied:  "PERMISSION_DENIED",
	GRPCResourceExhausted: "RESOURCE_EXHAUSTED",
	GRPCUnimplemented:     "UNIMPLEMENTED",
	GRPCInternal:          "INTERNAL",
	GRPCUnavailable:       "UNAVAILABLE",
	GRPCUnauthenticated:   "UNAUTHENTICATED",
}

// IsGRPC reports whether a request with Content-Type contentType is a
// gRPC call: application/grpc, alone or followed by "+" (a message
// format: +proto, +json) or ";" (parameters), compared without case.
// grpc-web (application/grpc-web...) is not.
func IsGRPC[S ~string | ~[]byte](contentType S) bool {
	const mt = "application/grpc"
	ct := string(contentType)
	if len(ct) < len(mt) || !strings.EqualFold(ct[:len(mt)], mt) {
		return false
	}
	return len(ct) == len(mt) || ct[len(mt)] == '+' || ct[len(mt)] == ';'
}

// GRPCStatus returns the gRPC status code, and its name, that a gRPC call
// is answered with when the gateway answers it itself with HTTP status
// httpStatus (docs/operations.md, "gRPC"): 429 RESOURCE_EXHAUSTED, 403
// PERMISSION_DENIED, 401 UNAUTHENTICATED, 404 UNIMPLEMENTED (no route
// serves the method), 502 and 503 UNAVAILABLE, 504 and 408
// DEADLINE_EXCEEDED; 400, 431 and 500 INTERNAL (a request the gateway
// cannot take is a protocol error, as a 400 is to a gRPC client, not an
// application's INVALID_ARGUMENT); any other UNKNOWN.
func GRPCStatus(httpStatus int) (code int, name string) {
	switch httpStatus {
	case 429:
		code = GRPCResourceExhausted
	case 403:
		code = GRPCPermissionDenied
	case 401:
		code = GRPCUnauthenticated
	case 404:
		code = GRPCUnimplemented
	case 502, 503:
		code = GRPCUnavailable
	case 504, 408:
		code = GRPCDeadlineExceeded
	case 400, 431, 500:
		code = GRPCInternal
	default:
		code = GRPCUnknown
	}
	return code, grpcNames[code]
}
