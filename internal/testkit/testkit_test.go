package testkit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB is a testing.TB whose cleanups run when the test calls cleanup
// and whose Errorf is recorded, so that a test can see what the kit does at
// cleanup and whether it fails the test.
type fakeTB struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
}

func refused(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return true
}

// TestListen: the listener is on 127.0.0.1, accepts a connection, and is
// closed at the test's cleanup.
func TestListen(t *testing.T) {
	f := &fakeTB{TB: t}
	ln := Listen(f)
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.Equal(net.IPv4(127, 0, 0, 1)) || addr.Port == 0 {
		t.Fatalf("Listen's address = %v, want 127.0.0.1 with a port", addr)
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	f.cleanup()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after cleanup = %v, want net.ErrClosed", err)
	}
	if !refused(t, addr.String()) {
		t.Errorf("%s accepts a connection after cleanup", addr)
	}
}

// TestServeHTTP: Serve runs an http.Server's Serve, which answers on the
// returned address; cleanup closes the listener and waits for Serve to
// return without failing the test.
func TestServeHTTP(t *testing.T) {
	f := &fakeTB{TB: t}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.URL.Path) //nolint:errcheck // the client checks the body
	})}
	var returned atomic.Bool
	addr := Serve(f, func(ln net.Listener) error {
		defer returned.Store(true)
		return hs.Serve(ln)
	})
	resp, err := http.Get("http://" + addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello /x" {
		t.Errorf("body = %q, want %q", body, "hello /x")
	}
	http.DefaultClient.CloseIdleConnections()
	f.cleanup()
	if !returned.Load() {
		t.Error("cleanup returned before serve did")
	}
	if len(f.errors) != 0 {
		t.Errorf("a server stopped by its listener's close failed the test: %q", f.errors)
	}
	if !refused(t, addr) {
		t.Errorf("%s accepts a connection after cleanup", addr)
	}
}

// TestServeError: an error from serve other than the closed listener's
// fails the test at cleanup, naming the address and the error.
func TestServeError(t *testing.T) {
	f := &fakeTB{TB: t}
	addr := Serve(f, func(ln net.Listener) error {
		_, err := ln.Accept()
		return fmt.Errorf("broke after %v", err != nil)
	})
	f.cleanup()
	if len(f.errors) != 1 || !strings.Contains(f.errors[0], addr) || !strings.Contains(f.errors[0], "broke after true") {
		t.Errorf("errors = %q, want one naming %s and the serve error", f.errors, addr)
	}
}

// TestServeConns: each connection gets its own handler (two are served at
// once); a connection still open at cleanup is closed, its handler
// returns before cleanup does, and a handler's return closes its
// connection.
func TestServeConns(t *testing.T) {
	f := &fakeTB{TB: t}
	var active, finished atomic.Int32
	addr := ServeConns(f, func(c net.Conn) {
		defer finished.Add(1)
		active.Add(1)
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "bye\n" {
				return
			}
			io.WriteString(c, "echo "+line) //nolint:errcheck // the client checks the answer
		}
	})
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	a, ra := dial()
	defer a.Close()
	b, rb := dial()
	defer b.Close()
	for _, x := range []struct {
		c net.Conn
		r *bufio.Reader
		s string
	}{{b, rb, "from b\n"}, {a, ra, "from a\n"}} {
		io.WriteString(x.c, x.s) //nolint:errcheck // the answer is checked
		if got, err := x.r.ReadString('\n'); err != nil || got != "echo "+x.s {
			t.Fatalf("answer = %q, %v; want %q", got, err, "echo "+x.s)
		}
	}
	io.WriteString(b, "bye\n") //nolint:errcheck // the close is checked
	if _, err := rb.ReadByte(); err != io.EOF {
		t.Errorf("read after the handler returned = %v, want EOF", err)
	}
	f.cleanup()
	if n := finished.Load(); n != 2 || active.Load() != 2 {
		t.Errorf("%d of %d handlers returned by the end of cleanup, want 2 of 2", n, active.Load())
	}
	if _, err := ra.ReadByte(); err != io.EOF {
		t.Errorf("read on a connection open at cleanup = %v, want EOF", err)
	}
	if len(f.errors) != 0 {
		t.Errorf("cleanup failed the test: %q", f.errors)
	}
}

// TestFreePorts: the ports are distinct, and each can be listened on.
func TestFreePorts(t *testing.T) {
	ports := FreePorts(t, 5)
	if len(ports) != 5 {
		t.Fatalf("FreePorts(5) = %v", ports)
	}
	if s := slices.Compact(slices.Sorted(slices.Values(ports))); len(s) != 5 {
		t.Errorf("FreePorts(5) = %v, not distinct", ports)
	}
	for _, p := range ports {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d: %v", p, err)
			continue
		}
		ln.Close()
	}
}

// TestClosedAddr: a dial to the address is refused.
func TestClosedAddr(t *testing.T) {
	addr := ClosedAddr(t)
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		t.Fatalf("ClosedAddr = %q, want 127.0.0.1:port", addr)
	}
	if !refused(t, addr) {
		t.Errorf("a dial to ClosedAddr's %s succeeded", addr)
	}
}

// TestListenAgain: a port whose listener was closed is bound again on
// the same address; an address off 127.0.0.1 ends the test.
func TestListenAgain(t *testing.T) {
	f := &fakeTB{TB: t}
	ln := Listen(f)
	addr := ln.Addr().String()
	ln.Close()
	again, err := ListenAgain(f, addr)
	if err != nil {
		t.Fatal(err)
	}
	if again.Addr().String() != addr {
		t.Fatalf("ListenAgain's address = %v, want %s", again.Addr(), addr)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	f.cleanup()
	if !refused(t, addr) {
		t.Errorf("%s accepts a connection after cleanup", addr)
	}
	g := &fatalTB{fakeTB: &fakeTB{TB: t}}
	func() {
		defer func() {
			if r := recover(); r != nil && r != errFatal {
				panic(r)
			}
		}()
		ListenAgain(g, "0.0.0.0:1")
	}()
	if !g.fatal {
		t.Error("ListenAgain on 0.0.0.0 did not end the test")
	}
}

// errFatal is what fatalTB's Fatalf panics with.
var errFatal = errors.New("fatal")

// fatalTB is a fakeTB whose Fatalf is recorded and ends the call with a
// panic of errFatal in place of the test.
type fatalTB struct {
	*fakeTB
	fatal bool
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = true
	panic(errFatal)
}
