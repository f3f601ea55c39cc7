package upconn

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testkit"
)

// pair returns a Conn dialed to a loopback listener and the accepted end.
func pair(t *testing.T) (*Conn, *net.TCPConn) {
	t.Helper()
	ln := testkit.Listen(t)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	uc := Wrap(c)
	t.Cleanup(func() { uc.Close(); s.Close() })
	uc.SetDeadline(time.Now().Add(10 * time.Second))
	s.SetDeadline(time.Now().Add(10 * time.Second))
	return uc, s.(*net.TCPConn)
}

const req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

// waitClosed waits until c sees the target's FIN (bounded).
func waitClosed(t *testing.T, c *Conn) {
	t.Helper()
	for i := 0; !c.PeerClosed(); i++ {
		if i > 500 {
			t.Fatal("the target's close was not seen within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readFails reads from c until an error, which it returns.
func readFails(c *Conn) error {
	var b [64]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			return err
		}
	}
}

func TestReached(t *testing.T) {
	t.Run("closed before the request", func(t *testing.T) {
		c, s := pair(t)
		if c.PeerClosed() {
			t.Fatal("PeerClosed on an open connection")
		}
		s.Close()
		waitClosed(t, c)
		m := c.Mark()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err) // the write succeeds: the FIN only half-closed it
		}
		readFails(c)
		if c.Reached(m) {
			t.Error("Reached: the target had closed the connection before the request arrived")
		}
		c.Close()
		if c.Reached(m) {
			t.Error("Reached after Close: the target had closed the connection before the request arrived")
		}
	})
	t.Run("read, then closed", func(t *testing.T) {
		c, s := pair(t)
		m := c.Mark()
		io.WriteString(c, req)
		b := make([]byte, len(req))
		if _, err := io.ReadFull(s, b); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := readFails(c); !errors.Is(err, io.EOF) {
			t.Fatalf("read: %v, want EOF", err)
		}
		if !c.Reached(m) {
			t.Error("not Reached: the target read the request")
		}
		c.Close()
		if !c.Reached(m) {
			t.Error("not Reached after Close: the target read the request")
		}
	})
	t.Run("unread at the close", func(t *testing.T) {
		c, s := pair(t)
		m := c.Mark()
		io.WriteString(c, req)
		for !queued(t, s) {
			time.Sleep(time.Millisecond) // the bytes are on their way; bounded by the deadline
		}
		s.Close() // with unread bytes: a reset
		readFails(c)
		c.Close()
		if !c.Reached(m) {
			t.Error("not Reached: the request was in the target's queue")
		}
	})
	t.Run("two writes, the first read", func(t *testing.T) {
		c, s := pair(t)
		m := c.Mark()
		io.WriteString(c, req[:10])
		b := make([]byte, 10)
		if _, err := io.ReadFull(s, b); err != nil {
			t.Fatal(err)
		}
		s.Close()
		waitClosed(t, c)
		io.WriteString(c, req[10:])
		readFails(c)
		c.Close()
		if !c.Reached(m) {
			t.Error("not Reached: the target read the request's first part")
		}
	})
	t.Run("refused", func(t *testing.T) {
		c, _ := pair(t)
		m := c.Mark()
		c.Refuse()
		if n, err := io.WriteString(c, req); n != 0 || !errors.Is(err, ErrRefused) {
			t.Fatalf("write on a refusing connection: %d, %v", n, err)
		}
		if c.Reached(m) {
			t.Error("Reached: nothing was written")
		}
	})
	t.Run("of", func(t *testing.T) {
		c, _ := pair(t)
		if Of(c) != c {
			t.Error("Of(Conn) is not the Conn")
		}
		if Of(c.TCPConn) != nil {
			t.Error("Of(a bare TCP connection) is not nil")
		}
	})
}

// BenchmarkRequestBookkeeping measures what a Conn adds to a request the
// engines send on a kept-alive connection: the mark, one counted write's
// bookkeeping, the idle test and the use noted (the write itself aside).
func BenchmarkRequestBookkeeping(b *testing.B) {
	c := &Conn{}
	now := time.Now().UnixNano()
	c.Use(now)
	for b.Loop() {
		if c.Idle(now) > time.Hour {
			b.Fatal("idle")
		}
		m := c.Mark()
		c.written.Add(64)
		c.writes.Add(1)
		if m.writes < 0 {
			b.Fatal("mark")
		}
		c.Use(now)
	}
}
