package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// reservedPort is the developer's own Redis; the harness never uses it.
const reservedPort = 6379

// server is a throwaway redis-server child process on a loopback TCP port,
// with persistence off.
type server struct {
	addr    string
	port    int
	version string
	cmd     *exec.Cmd
	dir     string
	done    chan struct{} // closed when the process has exited
}

// startServer starts redis-server (path bin) on a free loopback port and
// waits until it answers PING. It retries on another port when the chosen
// one was taken in the meantime.
func startServer(ctx context.Context, bin string) (*server, error) {
	var errs []error
	for range 5 {
		s, err := tryStart(ctx, bin)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("start redis-server: %w", errors.Join(errs...))
}

func tryStart(ctx context.Context, bin string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redisbench-")
	if err != nil {
		return nil, fmt.Errorf("make temp dir: %w", err)
	}
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", logFile, "--loglevel", "warning")
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	if err := s.waitReady(ctx, 5*time.Second); err != nil {
		log, _ := os.ReadFile(logFile)
		s.stop()
		return nil, fmt.Errorf("port %d: %w (log: %s)", port, err, bytes.TrimSpace(log))
	}
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

// waitReady polls the port until redis answers PING, the process exits or
// the timeout passes.
func (s *server) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		reply, err := s.do(ctx, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		select {
		case <-s.done:
			return errors.New("redis-server exited during start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG after %v: %v", timeout, err)
		}
	}
}

// stop kills the server, waits for it and removes its directory.
func (s *server) stop() {
	s.cmd.Process.Kill()
	<-s.done
	os.RemoveAll(s.dir)
}

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

// freePort returns a loopback port below the kernel's ephemeral range that
// was free a moment ago (ports in the ephemeral range may be taken by
// outgoing connections). It never returns reservedPort.
func freePort() (int, error) {
	lo, hi := 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph-12768 >= 1024 {
				lo, hi = eph-12768, eph
			}
		}
	}
	for range 50 {
		p := lo + rand.IntN(hi-lo)
		if p == reservedPort {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			ln.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free loopback port found")
}

// scriptTimePerCall returns the time Redis spent inside EVAL and EVALSHA
// per call since the last CONFIG RESETSTAT (INFO commandstats), or 0 when
// there was no script call. It excludes reading and writing the sockets.
func (s *server) scriptTimePerCall(ctx context.Context) (time.Duration, error) {
	info, err := s.do(ctx, "INFO", "commandstats")
	if err != nil {
		return 0, fmt.Errorf("read commandstats: %w", err)
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
		return 0, nil
	}
	return time.Duration(usec) * time.Microsecond / time.Duration(calls), nil
}
