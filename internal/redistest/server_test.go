package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServerDo(t *testing.T) {
	t.Parallel()
	s := NewServer(t, ServerOptions{})
	if s.Port() == reservedPort || s.Addr() != "127.0.0.1:"+strconv.Itoa(s.Port()) {
		t.Fatalf("Addr() = %s, Port() = %d", s.Addr(), s.Port())
	}
	steps := []struct {
		args []any
		want any
	}{
		{[]any{"PING"}, "PONG"},
		{[]any{"SET", "k", "v"}, "OK"},
		{[]any{"GET", "k"}, "v"},
		{[]any{"GET", "missing"}, nil},
		{[]any{"RPUSH", "l", "a", 2}, int64(2)},
		{[]any{"LRANGE", "l", 0, -1}, []any{"a", "2"}},
		{[]any{"PEXPIRE", "k", 10 * time.Second}, int64(1)},
	}
	for _, st := range steps {
		got, err := s.Do(st.args...)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(st.want) {
			t.Errorf("Do(%v) = %#v, %v; want %#v", st.args, got, err, st.want)
		}
	}
	_, err := s.Do("NOSUCHCOMMAND")
	var re *ReplyError
	if !errors.As(err, &re) || re.Prefix() != "ERR" {
		t.Errorf("Do(NOSUCHCOMMAND) error = %v, want an ERR *ReplyError", err)
	}
	if _, err := s.Do(); err == nil {
		t.Errorf("Do() with no arguments succeeded, want an error")
	}
	info, err := s.Info("server")
	if err != nil || info["tcp_port"] != strconv.Itoa(s.Port()) || info["process_id"] != strconv.Itoa(s.PID()) {
		t.Errorf("Info(server) tcp_port=%q process_id=%q err=%v; want %d, %d", info["tcp_port"], info["process_id"], err, s.Port(), s.PID())
	}
	// Persistence is off.
	for param, want := range map[string]string{"save": "", "appendonly": "no"} {
		v, err := s.Do("CONFIG", "GET", param)
		if a, _ := v.([]any); err != nil || len(a) != 2 || a[1] != want {
			t.Errorf("CONFIG GET %s = %v, %v; want %q", param, v, err, want)
		}
	}
	// The unix socket answers too.
	v, err := roundTrip(context.Background(), "unix", s.SocketPath(), "", []any{"GET", "k"})
	if err != nil || v != "v" {
		t.Errorf("GET k over unix socket = %v, %v; want v", v, err)
	}
}

// TestServerQuerySurvivesClientKill covers a harness call in flight when
// its connection is killed, as a sentinel does to every client when it
// turns a restarted master into a replica: Query dials again and answers.
func TestServerQuerySurvivesClientKill(t *testing.T) {
	t.Parallel()
	s := NewServer(t, ServerOptions{})
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := s.Query(context.Background(), "BLPOP", "q", 3)
		done <- result{v, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := s.Info("clients")
		if err == nil && info["blocked_clients"] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("BLPOP not blocked within 5s: %v %v", info, err)
		}
		time.Sleep(5 * time.Millisecond) // polling the server, bounded
	}
	if _, err := s.Do("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do("RPUSH", "q", "x"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || fmt.Sprint(r.v) != "[q x]" {
		t.Errorf("Query(BLPOP) across CLIENT KILL = %v, %v; want [q x]", r.v, r.err)
	}
	// An error reply is not retried.
	start := time.Now()
	if _, err := s.Query(context.Background(), "NOSUCHCOMMAND"); err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("Query(NOSUCHCOMMAND) = %v after %v, want an error at once", err, time.Since(start))
	}
}

func TestServerArgsAndPassword(t *testing.T) {
	t.Parallel()
	s := NewServer(t, ServerOptions{Password: "s3cret", Args: []string{"--maxmemory", "1mb", "--maxmemory-policy", "noeviction"}})
	v, err := s.Do("CONFIG", "GET", "maxmemory")
	if a, _ := v.([]any); err != nil || len(a) != 2 || a[1] != "1048576" {
		t.Errorf("CONFIG GET maxmemory = %v, %v; want 1048576", v, err)
	}
	_, err = roundTrip(context.Background(), "tcp", s.Addr(), "", []any{"PING"})
	var re *ReplyError
	if !errors.As(err, &re) || re.Prefix() != "NOAUTH" {
		t.Errorf("PING without password: error %v, want NOAUTH", err)
	}
	_, err = roundTrip(context.Background(), "tcp", s.Addr(), "wrong", []any{"PING"})
	if !errors.As(err, &re) || re.Prefix() != "WRONGPASS" {
		t.Errorf("PING with a wrong password: error %v, want WRONGPASS", err)
	}
	if v, err := s.Do("PING"); v != "PONG" || err != nil {
		t.Errorf("Do(PING) with password = %v, %v; want PONG", v, err)
	}
}

func TestServerKillRestart(t *testing.T) {
	t.Parallel()
	s := NewServer(t, ServerOptions{})
	port, pid := s.Port(), s.PID()
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	// A client connection open across the crash sees it as a reset or EOF.
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Errorf("Running() = true after Kill")
	}
	if !processGone(pid) {
		t.Errorf("process %d still exists after Kill", pid)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(conn, "PING\r\n")
	if line, err := bufio.NewReader(conn).ReadString('\n'); err == nil {
		t.Errorf("connection open across Kill read %q, want an error", line)
	}
	if _, err := s.Do("PING"); err == nil {
		t.Errorf("Do(PING) after Kill succeeded, want an error")
	}
	if err := s.Stop(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Stop() after Kill = %v, want ErrNotRunning", err)
	}
	if err := s.Kill(); err != nil {
		t.Errorf("second Kill() = %v, want nil", err)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Port() != port || s.PID() == pid || !s.Running() {
		t.Errorf("after Restart: port %d pid %d running %v; want port %d, a new pid, running", s.Port(), s.PID(), s.Running(), port)
	}
	if v, err := s.Do("GET", "k"); v != nil || err != nil {
		t.Errorf("GET k after Restart = %v, %v; want nil (no persistence)", v, err)
	}
	// Restart on a running server replaces the process.
	pid = s.PID()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid || !processGone(pid) {
		t.Errorf("Restart of a running server kept process %d", pid)
	}
	if v, err := s.Do("PING"); v != "PONG" {
		t.Errorf("PING after second Restart = %v, %v", v, err)
	}
}

func TestServerStopCont(t *testing.T) {
	t.Parallel()
	s := NewServer(t, ServerOptions{})
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if v, err := s.DoContext(ctx, "PING"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DoContext(PING) on a stopped server = %v, %v; want context.DeadlineExceeded", v, err)
	}
	if !s.Running() {
		t.Errorf("Running() = false for a stopped server, want true")
	}
	if err := s.Cont(); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Do("PING"); v != "PONG" {
		t.Errorf("PING after Cont = %v, %v; want PONG", v, err)
	}
	// Close kills a stopped server too.
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Errorf("stopped process %d survived Close", pid)
	}
}

func TestServerClose(t *testing.T) {
	t.Parallel()
	Require(t)
	s, err := StartServer(ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid, dir := s.PID(), s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	if !processGone(pid) {
		t.Errorf("process %d still exists after Close", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir %s after Close: %v, want it removed", dir, err)
	}
	if err := s.Restart(); err == nil {
		t.Errorf("Restart() after Close succeeded, want an error")
	}
}

func TestServerFixedPort(t *testing.T) {
	t.Parallel()
	Require(t)
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(t, ServerOptions{Port: port})
	if s.Port() != port {
		t.Errorf("Port() = %d, want %d", s.Port(), port)
	}
	// A second server on the same port fails clearly instead of talking to
	// the first.
	_, err = StartServer(ServerOptions{Port: port})
	if !errors.Is(err, errAddrInUse) {
		t.Errorf("StartServer on a taken port: error %v, want one wrapping errAddrInUse", err)
	}
	for _, p := range []int{reservedPort, -1, 70000} {
		if _, err := StartServer(ServerOptions{Port: p}); err == nil || errors.Is(err, errAddrInUse) {
			t.Errorf("StartServer(Port: %d) error = %v, want a refusal", p, err)
		}
	}
}

func TestServerStartFailure(t *testing.T) {
	t.Parallel()
	Require(t)
	_, err := StartServer(ServerOptions{Args: []string{"--no-such-option", "1"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-option") {
		t.Errorf("StartServer with a bad option: error %v, want one quoting the log", err)
	}
}

func TestAvailable(t *testing.T) {
	// Not parallel: it changes PATH and CI.
	t.Setenv("PATH", t.TempDir())
	err := Available()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Available() with an empty PATH = %v, want ErrUnavailable", err)
	}
	if _, err := StartServer(ServerOptions{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("StartServer with an empty PATH = %v, want ErrUnavailable", err)
	}
	for _, tt := range []struct {
		ci         string
		err        error
		skip, fail bool
	}{
		{"", nil, false, false},
		{"", err, true, false},
		{"true", err, false, true},
		{"", errors.New("boom"), false, true},
	} {
		t.Setenv("CI", tt.ci)
		var ft fakeTB
		Check(&ft, tt.err)
		if ft.skipped != tt.skip || ft.failed != tt.fail {
			t.Errorf("Check(CI=%q, %v): skipped %v, failed %v; want %v, %v", tt.ci, tt.err, ft.skipped, ft.failed, tt.skip, tt.fail)
		}
	}
}

// fakeTB records Skipf and Fatal instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()              {}
func (f *fakeTB) Skipf(string, ...any) { f.skipped = true }
func (f *fakeTB) Fatal(...any)         { f.failed = true }

// orphanEnv makes the test binary act as orphanChild (see TestMain).
const orphanEnv = "REDISTEST_ORPHAN_CHILD"

// orphanChild starts a server, prints its PID and directory and exits without closing it,
// as a test binary that crashes or times out would.
func orphanChild() {
	s, err := StartServer(ServerOptions{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(s.PID(), s.Dir())
	os.Exit(0)
}

func TestNoOrphanWhenTestBinaryDies(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("relies on Linux Pdeathsig")
	}
	Require(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	var pid int
	var dir string
	if _, err := fmt.Sscan(string(out), &pid, &dir); err != nil {
		t.Fatalf("child printed %q, want a PID and a directory", out)
	}
	defer os.RemoveAll(dir)
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("redis-server %d outlived its test binary by 5 s", pid)
		}
		time.Sleep(10 * time.Millisecond) // polling an external process, bounded above
	}
}
