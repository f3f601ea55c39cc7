// Package sluicetest builds the sluice binary and runs it, for the
// end-to-end tests, the fault harness and the benchmarks: one way to start
// the real program and learn where it listens, and to run the other
// programs the tests put beside it (proxies). Import it from tests and
// benchmark tools only.
package sluicetest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// MainPackage is the import path of the sluice command.
const MainPackage = "github.com/sluice-gw/sluice/gateway/cmd/sluice"

// Build compiles the sluice command into dir/sluice with `go build` (with
// -race when race is true) and returns the binary's path. The go command's
// output goes to stderr. It works from any module that requires sluice.
func Build(dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "sluice")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, MainPackage)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("sluicetest: build %s: %w", MainPackage, err)
	}
	return bin, nil
}

// Options says how to run the binary.
type Options struct {
	// Args are the command-line arguments, such as
	// []string{"serve", "--config", path}. For [Start] they must make
	// sluice serve.
	Args []string

	// Dir is the working directory; empty means ours.
	Dir string

	// Env, when not nil, is the process' environment; nil inherits ours.
	Env []string

	// MaxLog bounds the output kept by [Proc.Logs] to its last MaxLog
	// bytes. Zero keeps all of it.
	MaxLog int

	// StartTimeout bounds the wait for both listeners. Zero means 15
	// seconds.
	StartTimeout time.Duration
}

// Proc is a running sluice process, or another program [StartProgram]
// started. Its methods are safe for concurrent use.
type Proc struct {
	// Base is the public listener's URL, "http://host:port".
	Base string
	// Admin is the admin listener's URL, "http://host:port".
	Admin string

	cmd    *exec.Cmd
	logs   *Log
	exited chan struct{}
	code   int // the exit code, set before exited closes
}

// Start runs the binary with o.Args and waits until its "sluice listening"
// log line names both listeners. If the process exits first, or the start
// timeout passes (the process is then killed), the error quotes its output.
// The process dies with the caller on Linux; stop it with [Proc.Stop].
func Start(binary string, o Options) (*Proc, error) {
	if o.StartTimeout == 0 {
		o.StartTimeout = 15 * time.Second
	}
	pr, pw := io.Pipe()
	p, err := start(binary, o, pw)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(o.StartTimeout)
	defer t.Stop()
	select {
	case m := <-WatchListening(pr):
		p.Base, p.Admin = "http://"+m[0], "http://"+m[1]
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("sluicetest: sluice exited with %d before listening:\n%s", p.code, p.logs)
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.exited
		return nil, fmt.Errorf("sluicetest: sluice did not start within %v:\n%s", o.StartTimeout, p.logs)
	}
}

// StartProgram runs any program with o.Args, o.Dir and o.Env (such as a
// proxy a test puts in front of sluice) and returns once it has started:
// Base and Admin stay empty and o.StartTimeout is not used, so the caller
// waits for whatever tells that the program is ready. Its output is kept
// in [Proc.Logs]; it dies with the caller on Linux; stop it with
// [Proc.Stop], which signals its PID only.
func StartProgram(binary string, o Options) (*Proc, error) {
	return start(binary, o, nil)
}

// start runs binary as o says; stderr is also copied to tee, which is
// closed when the process exits, when tee is not nil.
func start(binary string, o Options, tee io.WriteCloser) (*Proc, error) {
	p := &Proc{logs: &Log{max: o.MaxLog}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, o.Args...)
	p.cmd.Dir, p.cmd.Env = o.Dir, o.Env
	dieWithParent(p.cmd)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if tee != nil {
		p.cmd.Stderr = io.MultiWriter(p.logs, tee)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("sluicetest: %w", err)
	}
	go func() {
		p.cmd.Wait()
		if tee != nil {
			tee.Close()
		}
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	return p, nil
}

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Logs returns the process' output (stdout and stderr) so far.
func (p *Proc) Logs() *Log { return p.logs }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited is closed once the process has exited and been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// ExitCode returns the exit code once [Proc.Exited] is closed (-1 when a
// signal ended the process), and -1 before.
func (p *Proc) ExitCode() int {
	select {
	case <-p.exited:
		return p.code
	default:
		return -1
	}
}

// Stop sends SIGTERM, waits up to grace for the process to exit, kills it
// after that, and returns its exit code.
func (p *Proc) Stop(grace time.Duration) int {
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.exited
	}
	return p.code
}

// listening matches sluice's "sluice listening" log line in slog's text
// format (msg="sluice listening" public=ADDR admin=ADDR).
var listening = regexp.MustCompile(`sluice listening"? public=(\S+) admin=(\S+)`)

// WatchListening reads sluice's log output from r until it ends and sends,
// once, the public and admin addresses of its "sluice listening" line. The
// channel is buffered, so nobody has to receive from it.
func WatchListening(r io.Reader) <-chan [2]string {
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sent := false
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- [2]string{m[1], m[2]}
				sent = true
			}
		}
		io.Copy(io.Discard, r)
	}()
	return found
}

// Log is a process' output, kept in memory; safe for concurrent use. With a
// limit it keeps only the last bytes written.
type Log struct {
	mu  sync.Mutex
	max int // zero: no limit
	buf bytes.Buffer
}

// Write appends b, dropping the oldest bytes beyond the limit.
func (l *Log) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(b)
	if over := l.buf.Len() - l.max; l.max > 0 && over > 0 {
		l.buf.Next(over)
	}
	return len(b), nil
}

// String returns what is kept.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
