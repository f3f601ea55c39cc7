package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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

// redisServer is a throwaway redis-server child process on a loopback TCP
// port, with persistence off.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{} // closed when the process has exited
}

// startRedis starts redis-server (path bin) on a free loopback port and waits
// until it answers PING, retrying on another port when the chosen one was
// taken in the meantime.
func startRedis(ctx context.Context, bin string) (*redisServer, error) {
	var errs []error
	for range 5 {
		s, err := tryStartRedis(ctx, bin)
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

func tryStartRedis(ctx context.Context, bin string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gatewaybench-redis-")
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
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	if err := s.waitReady(ctx, 5*time.Second); err != nil {
		log, _ := os.ReadFile(logFile)
		s.stop()
		return nil, fmt.Errorf("port %d: %w (log: %s)", port, err, bytes.TrimSpace(log))
	}
	return s, nil
}

// waitReady polls PING every 20ms until PONG, the process exits, or timeout.
func (s *redisServer) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := s.ping()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("redis-server exited before answering PING")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v: %w", timeout, err)
		}
	}
}

func (s *redisServer) ping() error {
	c, err := net.DialTimeout("tcp", s.addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// stop kills the server, waits for it and removes its directory.
func (s *redisServer) stop() {
	s.cmd.Process.Kill()
	<-s.done
	os.RemoveAll(s.dir)
}

// freePort returns a loopback TCP port that was free a moment ago, never
// the reserved one.
func freePort() (int, error) {
	for range 10 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if port != reservedPort {
			return port, nil
		}
	}
	return 0, errors.New("find a free port: only the reserved port came back")
}
