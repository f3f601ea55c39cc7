package redistest

import (
	"context"
	"strconv"
	"testing"
)

// StartReplica starts a redis-server that replicates master (--replicaof,
// placed before opts.Args) and waits until the replica's link is up and the
// master lists it as an online replica. opts.Password, when set, is also the
// replica's masterauth, so it must be the master's password. The caller must
// Close the replica; use [NewReplica] in a test. The error wraps
// [ErrUnavailable] when redis-server is not installed.
//
// It is for tests of the master's replication options, for example
// min-replicas-to-write with the replica stopped ([Server.Stop]).
func StartReplica(master *Server, opts ServerOptions) (*Server, error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	opts.Args = append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port())}, opts.Args...)
	r, err := startServer(opts, nodeKind{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	if err := waitUntil(ctx, "replica "+r.Addr()+" to sync", func(ctx context.Context) error {
		return replicaInSync(ctx, master, r)
	}); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// NewReplica starts a replica of master for the test t and closes it in
// t.Cleanup. It skips or fails the test like [NewServer].
func NewReplica(t testing.TB, master *Server, opts ServerOptions) *Server {
	t.Helper()
	r, err := StartReplica(master, opts)
	Check(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}
