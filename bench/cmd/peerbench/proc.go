package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
)

// child is a process the harness started and stops by its PID.
type child struct {
	name   string
	cmd    *exec.Cmd
	log    *tailLog
	exited chan struct{}
}

// startChild runs bin with args and env (nil inherits ours) in dir. The
// child's output is kept (its last 16 KiB) for error messages; lines are
// also sent to lines, when it is not nil, until the child exits. On Linux
// the kernel sends the child deathSig if the harness dies first.
func startChild(name, bin string, args, env []string, dir string, deathSig syscall.Signal, lines chan<- string) (*child, error) {
	c := &child{name: name, log: &tailLog{max: 16 << 10}, exited: make(chan struct{})}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env, c.cmd.Dir = env, dir
	setDeathSignal(c.cmd, deathSig)
	pr, pw := io.Pipe()
	out := io.MultiWriter(c.log, pw)
	c.cmd.Stdout, c.cmd.Stderr = out, out
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if lines != nil {
				select {
				case lines <- sc.Text():
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		c.cmd.Wait()
		pw.Close()
		close(c.exited)
	}()
	return c, nil
}

// pid returns the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// done reports whether the child has exited.
func (c *child) done() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// stop sends sig to the child, waits up to grace for it to exit, then kills
// it. Descendants the child leaves behind (listed before the signal) are
// killed by their PIDs too, so a killed nginx master leaves no worker.
func (c *child) stop(sig syscall.Signal, grace time.Duration) {
	type kid struct {
		pid  int
		comm string
	}
	var kids []kid
	for _, pid := range benchproc.Descendants(c.pid()) {
		kids = append(kids, kid{pid, comm(pid)})
	}
	if !c.done() {
		c.cmd.Process.Signal(sig)
		select {
		case <-c.exited:
		case <-time.After(grace):
			c.cmd.Process.Kill()
			<-c.exited
		}
	}
	// A PID whose program name changed was reused by an unrelated
	// process after the descendant exited: it is left alone.
	for _, k := range kids {
		if k.comm != "" && comm(k.pid) == k.comm {
			syscall.Kill(k.pid, syscall.SIGKILL)
		}
	}
}

// comm returns the program name of process pid, or "" when it is gone.
func comm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// errExited is returned when a child exits while the harness waits on it.
var errExited = errors.New("exited")

// tailLog keeps the last max bytes written to it; safe for concurrent use.
type tailLog struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > l.max {
		l.b = append(l.b[:0], l.b[len(l.b)-l.max:]...)
	}
	return len(p), nil
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
