package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// server is a throwaway redis-server child process on a loopback TCP port,
// with persistence off.
type server struct {
	addr    string
	port    int
	version string
	srv     *redistest.Server
}

// startServer starts redis-server (path bin) on a free loopback port below
// the ephemeral range, waits until it answers PING and reads its version.
func startServer(ctx context.Context, bin string) (*server, error) {
	r, err := redistest.StartServer(redistest.ServerOptions{Bin: bin})
	if err != nil {
		return nil, err
	}
	s := &server{addr: r.Addr(), port: r.Port(), srv: r}
	info, err := s.do(ctx, "INFO", "server")
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("read server info: %w", err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			s.version = v
		}
	}
	return s, nil
}

// stop kills the server, waits for it and removes its directory.
func (s *server) stop() { s.srv.Close() }

// pid returns the server's process id.
func (s *server) pid() int { return s.srv.PID() }

// do sends one command on a fresh connection and returns a simple, bulk or
// integer reply as a string. It is for setup only, not the measured path.
func (s *server) do(ctx context.Context, args ...any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := s.srv.DoContext(ctx, args...)
	if err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	}
	return "", fmt.Errorf("redis: unexpected reply %#v to %v", v, args[0])
}

// scriptTimePerCall returns the time Redis spent inside EVAL and EVALSHA
// per call since the last CONFIG RESETSTAT (INFO commandstats), or 0 when
// there was no script call, and the number of those calls. It excludes
// reading and writing the sockets.
func (s *server) scriptTimePerCall(ctx context.Context) (time.Duration, uint64, error) {
	info, err := s.do(ctx, "INFO", "commandstats")
	if err != nil {
		return 0, 0, fmt.Errorf("read commandstats: %w", err)
	}
	var calls, usec int64
	for line := range strings.SplitSeq(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			rest, ok = strings.CutPrefix(line, "cmdstat_eval:")
		}
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	if calls == 0 {
		return 0, 0, nil
	}
	return time.Duration(usec) * time.Microsecond / time.Duration(calls), uint64(calls), nil
}
