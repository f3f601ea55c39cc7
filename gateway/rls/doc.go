// Package rls serves Envoy's rate limit service,
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, over gRPC,
// deciding with sluice's policies and stores (docs/envoy.md).
//
// A [Service] compiles the domains of a configuration's rls section
// (envoyproxy/ratelimit's own files, read as they are, and domains whose
// descriptors name sluice policies) into descriptor trees. Each call's
// descriptors are matched as envoyproxy/ratelimit matches them, and every
// limited descriptor of one call is decided in one store call,
// all-or-nothing. The answer carries one status per descriptor and the
// rate-limit headers the gateway sends ([httplimit.Evaluated]).
// A [Server] is the gRPC listener in front of the Service in force.
//
// This package is the only one that imports gRPC and Envoy's API types.
package rls
