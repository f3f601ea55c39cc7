// Package redistest starts throwaway redis-server processes for tests: a
// standalone server, a Redis Cluster, or a master and replica watched by
// sentinels. It needs only the redis-server binary (7.0 or later) on PATH;
// cluster creation and all control commands speak RESP directly, so neither
// redis-cli nor a client library is needed. Import it from _test.go files
// only.
//
// Every server is a child process of the test binary, started in the
// foreground (never --daemonize) in its own process group, listening on
// 127.0.0.1 at a free port (never 6379) and on a unix socket in its own
// temporary directory, with persistence off. Close sends SIGKILL to the
// process group, reaps the process and removes the directory. On Linux the
// kernel also kills the server if the test binary dies without cleaning up
// (Pdeathsig), so a crashed or timed-out test leaves no orphans.
//
// # One server per test package
//
// Start the server in TestMain, keep the error, and let each test decide
// with [Check]: it skips when redis-server is not installed, fails instead
// when CI=true, and fails on any other start error. Call os.Exit only after
// the deferred Close has run, which is why the work lives in run:
//
//	var (
//		srv      *redistest.Server
//		startErr error
//	)
//
//	func TestMain(m *testing.M) { os.Exit(run(m)) }
//
//	func run(m *testing.M) int {
//		srv, startErr = redistest.StartServer(redistest.ServerOptions{})
//		if startErr == nil {
//			defer srv.Close()
//		}
//		return m.Run()
//	}
//
//	func server(t *testing.T) *redistest.Server {
//		t.Helper()
//		redistest.Check(t, startErr)
//		return srv
//	}
//
// Tests sharing that server use their own key prefixes so they can run in
// parallel.
//
// # A server per test
//
// Tests that break a server (kill, stop, restart, CONFIG SET, CLIENT PAUSE)
// should own it. [NewServer], [NewCluster] and [NewSentinel] skip or fail
// the test like [Check] and close what they started in t.Cleanup:
//
//	s := redistest.NewServer(t, redistest.ServerOptions{})
//	s.Kill()                           // crash: SIGKILL, reaped
//	s.Restart()                        // same port, empty data
//	s.Stop(); defer s.Cont()           // hang: SIGSTOP / SIGCONT
//	s.Do("CLIENT", "PAUSE", 500*time.Millisecond, "WRITE")
//	s.Do("CONFIG", "SET", "maxmemory", "1mb")
//
// [Server.Do] is a tiny RESP client for such control commands; its replies
// are plain Go values (string, int64, []any, nil) and error replies come back
// as a *[ReplyError].
package redistest
