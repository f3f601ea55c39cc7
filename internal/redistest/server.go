package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ServerOptions configures a standalone redis-server. The zero value starts a
// server without a password on a free port.
type ServerOptions struct {
	// Bin is the path of the redis-server binary. Empty means redis-server
	// found on PATH.
	Bin string

	// Args are extra redis-server arguments in "--name value" form, placed
	// after the defaults so they override them, for example
	// []string{"--maxmemory", "1mb", "--maxmemory-policy", "noeviction"}.
	Args []string

	// Port is the TCP port on 127.0.0.1. Zero picks a free port, retrying with
	// another one if a different process takes it first. 6379 is refused.
	Port int

	// Password, when not empty, sets requirepass (for the default user) and
	// masterauth, and [Server.Do] and the readiness check authenticate with it.
	Password string

	// StartTimeout bounds the wait for the server to answer PING after each
	// start and restart. Zero means 10 seconds.
	StartTimeout time.Duration
}

// Server is a redis-server child process on 127.0.0.1, with its own temporary
// directory (holding its log, its unix socket and, for cluster nodes,
// nodes.conf). Persistence is off. The process runs in the foreground as a
// child of the test binary; Close kills it, reaps it and removes the
// directory. A Server's methods are safe for concurrent use.
type Server struct {
	opts     ServerOptions
	bin      string
	dir      string
	port     int
	busPort  int    // cluster bus port; zero for other servers
	confPath string // sentinel config file, passed first; empty otherwise
	sentinel bool

	mu     sync.Mutex
	proc   *proc // the latest process; nil before the first start
	closed bool
}

// proc is one run of redis-server.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
}

// exited reports whether the process has been reaped.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the process group and waits until it is reaped.
func (p *proc) kill() {
	signalGroup(p.cmd.Process.Pid, sigKill)
	<-p.done
}

// nodeKind carries what differs between standalone, cluster and sentinel
// servers.
type nodeKind struct {
	cluster  bool
	sentinel bool
	conf     string // sentinel: body of the config file
}

// errAddrInUse marks a start that failed because the port was taken.
var errAddrInUse = errors.New("address already in use")

// defaultStartTimeout is the zero value of ServerOptions.StartTimeout.
const defaultStartTimeout = 10 * time.Second

// StartServer starts a standalone redis-server and waits until it answers
// PING. The caller must Close it; use [NewServer] in a test. The error wraps
// [ErrUnavailable] when redis-server is not installed.
func StartServer(opts ServerOptions) (*Server, error) {
	return startServer(opts, nodeKind{})
}

// NewServer starts a standalone redis-server for the test t and closes it in
// t.Cleanup. It skips the test when redis-server is unavailable (fails with
// CI=true; see [Check]) and fails it on any other start error.
func NewServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	s, err := StartServer(opts)
	Check(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func startServer(opts ServerOptions, kind nodeKind) (*Server, error) {
	if opts.Bin == "" {
		if err := Available(); err != nil {
			return nil, err
		}
	} else if err := platformSupported(); err != nil {
		return nil, err
	}
	if opts.Port < 0 || opts.Port > 65535 || opts.Port == reservedPort {
		return nil, fmt.Errorf("redistest: port %d not allowed (want 0 for a free port, or 1-65535 except %d)", opts.Port, reservedPort)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	bin := opts.Bin
	if bin == "" {
		var err error
		if bin, err = exec.LookPath(binaryName); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	dir, err := makeDir()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, bin: bin, dir: dir, sentinel: kind.sentinel}
	if kind.sentinel {
		s.confPath = filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(s.confPath, []byte(kind.conf), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: write sentinel config: %w", err)
		}
	}
	const attempts = 5
	for i := 0; ; i++ {
		if err = s.pickPorts(kind.cluster); err == nil {
			err = s.launch()
		}
		if err == nil {
			return s, nil
		}
		if opts.Port != 0 || !errors.Is(err, errAddrInUse) || i == attempts-1 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// makeDir creates the server's temporary directory. The unix socket lives
// there, and socket paths are limited to about 100 bytes, so a long TMPDIR
// falls back to /tmp.
func makeDir() (string, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err == nil && len(dir) > 80 {
		os.RemoveAll(dir)
		dir, err = os.MkdirTemp("/tmp", "redistest-")
	}
	if err != nil {
		return "", fmt.Errorf("redistest: create temp dir: %w", err)
	}
	return dir, nil
}

// pickPorts sets the TCP port (and the cluster bus port) for the next start.
func (s *Server) pickPorts(cluster bool) error {
	s.port = s.opts.Port
	if s.port == 0 {
		p, err := FreePort()
		if err != nil {
			return err
		}
		s.port = p
	}
	if !cluster {
		return nil
	}
	for {
		p, err := FreePort()
		if err != nil {
			return err
		}
		if p != s.port {
			s.busPort = p
			return nil
		}
	}
}

// args returns the command line, the fixed defaults first so that
// opts.Args can override them.
func (s *Server) args() []string {
	var a []string
	if s.confPath != "" {
		a = append(a, s.confPath, "--sentinel")
	}
	a = append(a,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--daemonize", "no",
		"--dir", s.dir,
		"--unixsocket", s.SocketPath(),
		"--unixsocketperm", "700",
		"--logfile", "",
		"--save", "",
		"--appendonly", "no",
		// A replica's first sync would otherwise wait 5 s for more replicas.
		"--repl-diskless-sync-delay", "0",
	)
	if s.busPort != 0 {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(s.busPort),
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
		)
	}
	if s.opts.Password != "" {
		a = append(a, "--requirepass", s.opts.Password, "--masterauth", s.opts.Password)
	}
	return append(a, s.opts.Args...)
}

// launch starts one redis-server process and waits until it is ready. On
// failure the process is killed and reaped, and the error quotes its log.
func (s *Server) launch() error {
	logPath := s.LogPath()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("redistest: open log: %w", err)
	}
	logStart, _ := logFile.Seek(0, io.SeekEnd)
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	if err := s.waitReady(p); err != nil {
		p.kill()
		out := readFrom(logPath, logStart)
		if bytes.Contains(out, []byte("Address already in use")) {
			err = fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		return fmt.Errorf("redistest: start redis-server on port %d: %w\n%s", s.port, err, tail(out, 20))
	}
	return nil
}

// waitReady polls until the server answers PING over its unix socket and
// then over TCP, the process exits, or the start timeout passes. The unix
// socket lives in our own directory, so an answer there proves it is our
// process answering and not another server that holds the port; redis-server
// creates the socket after binding TCP, so by then the TCP port is ours.
func (s *Server) waitReady(p *proc) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.StartTimeout)
	defer cancel()
	delay := 2 * time.Millisecond
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("exited early: %v", p.cmd.ProcessState)
		}
		if last = s.ping(ctx); last == nil {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-p.done:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("not ready after %v: %w", s.opts.StartTimeout, last)
		}
		t.Stop()
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// ping checks one readiness round over the unix socket then over TCP. A
// NOAUTH reply counts as ready: the server is serving, and it only means the
// password came in Args rather than ServerOptions.Password.
func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for _, na := range [][2]string{{"unix", s.SocketPath()}, {"tcp", s.Addr()}} {
		v, err := roundTrip(ctx, na[0], na[1], s.opts.Password, []any{"PING"})
		var re *ReplyError
		if errors.As(err, &re) && re.Prefix() == "NOAUTH" {
			continue
		}
		if err != nil {
			return fmt.Errorf("ping over %s: %w", na[0], err)
		}
		if v != "PONG" {
			return fmt.Errorf("ping over %s: got %v, want PONG", na[0], v)
		}
	}
	return nil
}

// readFrom returns the contents of path from offset on, or nil.
func readFrom(path string, offset int64) []byte {
	b, err := os.ReadFile(path)
	if err != nil || offset > int64(len(b)) {
		return nil
	}
	return b[offset:]
}

// tail returns the last n lines of b, indented, for an error message.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "redis-server log:\n\t" + strings.Join(lines, "\n\t")
}

// Addr returns the server's TCP address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the server's TCP port. It stays the same across [Server.Restart].
func (s *Server) Port() int { return s.port }

// BusPort returns a cluster node's cluster bus port, or zero for a server
// that is not a cluster node.
func (s *Server) BusPort() int { return s.busPort }

// SocketPath returns the path of the server's unix socket (permissions 0700).
func (s *Server) SocketPath() string { return filepath.Join(s.dir, "redis.sock") }

// Dir returns the server's temporary directory, removed by Close.
func (s *Server) Dir() string { return s.dir }

// LogPath returns the file that holds the server's log, across restarts.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "redis.log") }

// Password returns ServerOptions.Password.
func (s *Server) Password() string { return s.opts.Password }

// PID returns the process ID of the current redis-server process, or of the
// last one if it has exited.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether the server process is alive (possibly stopped by
// [Server.Stop]). It is false after Kill, Close, or a crash.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// ErrNotRunning is returned by [Server.Stop] and [Server.Cont] when the
// server process has exited.
var ErrNotRunning = errors.New("redistest: server not running")

// errClosed is returned by Restart after Close.
var errClosed = errors.New("redistest: server closed")

// Kill simulates a crash (kill -9): it sends SIGKILL to the server's process
// group and waits until the process is reaped. Clients see their connections
// reset and new dials refused until [Server.Restart]. Killing a server that
// is not running does nothing.
func (s *Server) Kill() error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
	return nil
}

// Stop simulates a hung server: it sends SIGSTOP, so the server keeps its
// connections open but answers nothing until [Server.Cont]. It returns
// [ErrNotRunning] if the process has exited.
func (s *Server) Stop() error { return s.signal(sigStop) }

// Cont resumes a server paused by [Server.Stop] (SIGCONT). It returns
// [ErrNotRunning] if the process has exited.
func (s *Server) Cont() error { return s.signal(sigCont) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return ErrNotRunning
	}
	if err := signalProcess(s.proc.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("redistest: send %v: %w", sig, err)
	}
	return nil
}

// Restart starts the server again on the same port, with the same directory
// and arguments, and waits until it answers PING. A running server is killed
// first. Data does not survive (persistence is off), but a cluster node keeps
// its identity through nodes.conf and a sentinel its config file. Restart
// fails if another process took the port meanwhile, or after Close.
func (s *Server) Restart() error {
	s.mu.Lock()
	closed, p := s.closed, s.proc
	s.mu.Unlock()
	if closed {
		return errClosed
	}
	if p != nil {
		p.kill()
	}
	return s.launch()
}

// Close kills the server (SIGKILL to its process group), reaps it and
// removes its directory. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("redistest: remove dir: %w", err)
	}
	return nil
}

// Do sends one command over a new TCP connection (authenticating first when
// a password is set) and returns the reply: a string for simple and bulk
// strings, int64 for integers, []any for arrays, nil for null. An error reply
// is returned as a *[ReplyError] error; inside an array it is an element.
// Arguments may be strings, []byte, integers, or time.Duration (sent as
// milliseconds); anything else is formatted with fmt. The call gives up after
// 5 seconds, so it returns an error, not a hang, on a stopped server.
//
// Do is for controlling the server in tests (CLIENT PAUSE, CONFIG SET, SCRIPT
// FLUSH, DEBUG SLEEP, INFO), not for load.
func (s *Server) Do(args ...any) (any, error) {
	return s.DoContext(context.Background(), args...)
}

// DoContext is [Server.Do] bounded by ctx instead of the 5-second default
// when ctx has a deadline. It returns ctx.Err() when ctx ends first.
func (s *Server) DoContext(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redistest: empty command")
	}
	return roundTrip(ctx, "tcp", s.Addr(), s.opts.Password, args)
}

// Query is [Server.DoContext] for a command that is safe to send twice
// (ROLE, INFO, DBSIZE, SCAN, CONFIG GET): when the connection fails (refused,
// reset or closed before the reply, as when a sentinel turns the server into
// a replica and kills its clients), it dials again every 20ms until ctx ends
// (after 5 seconds when ctx has no deadline). An error reply is returned at
// once; when ctx ends, the last connection error is returned.
func (s *Server) Query(ctx context.Context, args ...any) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCommandTimeout)
		defer cancel()
	}
	for {
		v, err := s.DoContext(ctx, args...)
		var re *ReplyError
		if err == nil || errors.As(err, &re) || ctx.Err() != nil {
			return v, err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("redistest: %v on %s: %w (last: %w)", args[0], s.Addr(), ctx.Err(), err)
		}
	}
}

// Info runs INFO with the given section ("" for the default sections) and
// returns its fields as a map, for example info["used_memory"] or
// info["cmdstat_evalsha"].
func (s *Server) Info(section string) (map[string]string, error) {
	return s.infoContext(context.Background(), section)
}

func (s *Server) infoContext(ctx context.Context, section string) (map[string]string, error) {
	args := []any{"INFO"}
	if section != "" {
		args = append(args, section)
	}
	v, err := s.DoContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	str, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("redistest: INFO reply is %T, want string", v)
	}
	return parseInfo(str), nil
}

// parseInfo parses INFO output: "key:value" lines, skipping "# Section"
// headers and blank lines.
func parseInfo(s string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// Dial opens a [Conn] to the server, authenticated with its password.
func (s *Server) Dial() (*Conn, error) {
	return Dial(context.Background(), s.Addr(), s.opts.Password)
}
