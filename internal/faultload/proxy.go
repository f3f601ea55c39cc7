package faultload

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP fault proxy for one backend (RELIABILITY.md §4): it
// forwards each connection to the backend and can delay every reply chunk
// (the backend has already executed the command: a reply lost to a client
// timeout) or reset every open connection. It is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // ns added to each backend→client chunk
	evals  atomic.Int64 // EVAL and EVALSHA commands forwarded
	mu     sync.Mutex
	conns  map[*net.TCPConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewProxy listens on 127.0.0.1 (a free port) and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*net.TCPConn]struct{})}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetReplyDelay delays every chunk the backend sends by d from now on
// (zero: no delay). Order is kept.
func (p *Proxy) SetReplyDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Scripts returns how many EVAL and EVALSHA commands clients have sent
// through the proxy so far.
func (p *Proxy) Scripts() int64 { return p.evals.Load() }

// ResetAll closes every open connection with a TCP reset.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.SetLinger(0)
		c.Close()
	}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.ResetAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(cs ...*net.TCPConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...*net.TCPConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c.(*net.TCPConn)) })
	}
}

// serve pipes one client connection to a new backend connection.
func (p *Proxy) serve(client *net.TCPConn) {
	bc, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		client.SetLinger(0)
		client.Close()
		return
	}
	backend := bc.(*net.TCPConn)
	if !p.track(client, backend) {
		client.Close()
		backend.Close()
		return
	}
	defer p.untrack(client, backend)
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(backend, &scriptCounter{r: client, n: &p.evals})
		backend.CloseWrite()
	})
	p.delayedCopy(client, backend)
	client.CloseWrite()
	wg.Wait()
}

type chunk struct {
	due  time.Time
	data []byte
}

// delayedCopy copies src to dst, holding each chunk back by the reply delay
// in force when it was read.
func (p *Proxy) delayedCopy(dst, src *net.TCPConn) {
	ch := make(chan chunk, 1024)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				ch <- chunk{time.Now().Add(time.Duration(p.delay.Load())), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(c.data); err != nil {
			src.Close() // unblock the reader
			for range ch {
			}
			return
		}
	}
}

// scriptCounter counts the EVAL and EVALSHA commands (RESP bulk strings) in
// what it reads.
type scriptCounter struct {
	r    io.Reader
	n    *atomic.Int64
	tail []byte // the end of the previous read, for a token split across reads
}

var (
	evalToken    = []byte("$4\r\nEVAL\r\n")
	evalshaToken = []byte("$7\r\nEVALSHA\r\n")
)

func (c *scriptCounter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		buf := append(c.tail, b[:n]...)
		cnt := bytes.Count(buf, evalToken) + bytes.Count(buf, evalshaToken)
		// Tokens wholly inside the tail were counted by the previous read.
		cnt -= bytes.Count(c.tail, evalToken) + bytes.Count(c.tail, evalshaToken)
		c.n.Add(int64(cnt))
		keep := min(len(buf), len(evalshaToken)-1)
		c.tail = append(c.tail[:0:0], buf[len(buf)-keep:]...)
	}
	return n, err
}
