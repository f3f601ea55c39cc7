package rls

import (
	"context"
	"errors"
	"net"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Server is the gRPC listener of the rate limit service. Each call is
// decided by the Service that Current returns at the time, so that a
// reload swaps services without dropping a call. It is safe for
// concurrent use.
type Server struct {
	gs *grpc.Server
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// Current returns the Service to decide a call and a function to call
	// once the call is decided; a nil Service answers UNAVAILABLE (the
	// current configuration has no rls section). Required.
	Current func() (svc *Service, done func())
	// MaxMessageBytes bounds one request message; a larger one is refused
	// with RESOURCE_EXHAUSTED before it is decoded. Zero means 64 KiB.
	MaxMessageBytes int
	// Recovered, if not nil, is called with the value of a panic in a
	// call, which is recovered and answered INTERNAL. It is called from the
	// function deferred to recover, so the panicking stack is still there
	// for it to print. Nil: the panic is answered INTERNAL unrecorded.
	Recovered func(v any)
}

// NewServer returns a Server; it serves once Serve is called.
func NewServer(o ServerOptions) (*Server, error) {
	if o.Current == nil {
		return nil, errors.New("rls: ServerOptions.Current is required")
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 64 << 10
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(o.MaxMessageBytes), grpc.ForceServerCodecV2(newCodec()))
	rlsv3.RegisterRateLimitServiceServer(gs, current{o.Current, o.Recovered})
	return &Server{gs: gs}, nil
}

// Serve serves ln until Shutdown; it returns nil after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.gs.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown stops accepting calls and waits for running ones until ctx is
// done, then cuts off what is left; it returns ctx's error in that case.
func (s *Server) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.gs.Stop()
		<-done
		return ctx.Err()
	}
}

// current routes each call to the Service in force.
type current struct {
	get       func() (*Service, func())
	recovered func(v any)
}

// errPanicked answers a call whose decision panicked.
var errPanicked = status.Error(codes.Internal, "the rate limit service failed while deciding this request")

func (c current) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (resp *rlsv3.RateLimitResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			if c.recovered != nil {
				c.recovered(v)
			}
			resp, err = nil, errPanicked
		}
	}()
	svc, done := c.get()
	defer done()
	if svc == nil {
		return nil, status.Error(codes.Unavailable, "the rate limit service is not configured (no rls section)")
	}
	return svc.ShouldRateLimit(ctx, req)
}
