package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
)

// server is a throwaway redis-server child process on a loopback TCP port,
// with persistence off.
type server struct {
	addr    string
	port    int
	version string
	cmd     *exec.Cmd
	proc    *benchproc.Redis
}

// startServer starts redis-server (path bin) on a free loopback port below
// the ephemeral range, waits until it answers PING and reads its version.
func startServer(ctx context.Context, bin string) (*server, error) {
	r, err := benchproc.StartRedis(ctx, benchproc.RedisOptions{
		Bin:        bin,
		TempPrefix: "redisbench-",
		FreePort:   benchproc.FreePortBelowEphemeral,
	})
	if err != nil {
		return nil, err
	}
	s := &server{addr: r.Addr, port: r.Port, cmd: r.Cmd, proc: r}
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
func (s *server) stop() { s.proc.Stop() }

// do sends one command on a fresh connection and returns a simple, bulk or
// integer reply as a string. It is for setup only, not the measured path.
func (s *server) do(ctx context.Context, args ...string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(encodeCommand(args)); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(conn))
}

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args []string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// readReply reads one RESP2 reply that is not an array.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
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
