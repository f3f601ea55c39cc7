package benchproc

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

// RedisOptions configures StartRedis.
type RedisOptions struct {
	// Bin is the path of the redis-server binary. Required.
	Bin string
	// TempPrefix is the prefix of the server's temporary directory. Zero
	// means "benchproc-redis-".
	TempPrefix string
	// FreePort picks the port to try. Zero means FreePort.
	FreePort func() (int, error)
}

// Redis is a throwaway redis-server child process on a loopback TCP port,
// with persistence off.
type Redis struct {
	// Addr is the server's host:port.
	Addr string
	// Port is the server's TCP port.
	Port int
	// Cmd is the running redis-server process.
	Cmd *exec.Cmd

	dir  string
	done chan struct{} // closed when the process has exited
}

// StartRedis starts redis-server on a free loopback port and waits until it
// answers PING, retrying on another port when the chosen one was taken in
// the meantime.
func StartRedis(ctx context.Context, o RedisOptions) (*Redis, error) {
	if o.TempPrefix == "" {
		o.TempPrefix = "benchproc-redis-"
	}
	if o.FreePort == nil {
		o.FreePort = FreePort
	}
	var errs []error
	for range 5 {
		s, err := tryStartRedis(ctx, o)
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

func tryStartRedis(ctx context.Context, o RedisOptions) (*Redis, error) {
	port, err := o.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", o.TempPrefix)
	if err != nil {
		return nil, fmt.Errorf("make temp dir: %w", err)
	}
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(o.Bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", logFile, "--loglevel", "warning")
	SetDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("run %s: %w", o.Bin, err)
	}
	s := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	if err := s.waitReady(ctx, 5*time.Second); err != nil {
		log, _ := os.ReadFile(logFile)
		s.Stop()
		return nil, fmt.Errorf("port %d: %w (log: %s)", port, err, bytes.TrimSpace(log))
	}
	return s, nil
}

// waitReady polls PING every 20ms until PONG, the process exits, or timeout.
func (s *Redis) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := s.ping()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return errors.New("redis-server exited before answering PING")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v: %w", timeout, err)
		}
	}
}

func (s *Redis) ping() error {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
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

// Stop kills the server, waits for it and removes its directory.
func (s *Redis) Stop() {
	s.Cmd.Process.Kill()
	<-s.done
	os.RemoveAll(s.dir)
}
