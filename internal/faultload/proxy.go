package faultload

import (
	"bytes"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP fault proxy for one backend (docs/reliability.md): it
// forwards each connection to the backend and can delay every reply chunk
// (the backend has already executed the command: a reply lost to a client
// timeout), with jitter, hold all traffic (a blackhole), or reset every
// open connection. It is safe for concurrent use.
type Proxy struct {
	ln      net.Listener
	target  string
	delay   atomic.Int64     // ns added to each backend→client chunk
	jitter  atomic.Int64     // ns: each chunk's delay is delay ± up to jitter
	scripts map[string]int64 // EVALSHA sent, by SHA; EVAL under "EVAL"; guarded by mu
	mu      sync.Mutex
	conns   map[*net.TCPConn]struct{}
	held    chan struct{} // non-nil while blackholed; closed when traffic flows again
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy listens on 127.0.0.1 (a free port) and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*net.TCPConn]struct{}), scripts: map[string]int64{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetReplyDelay delays every chunk the backend sends by d from now on
// (zero: no delay). Order is kept.
func (p *Proxy) SetReplyDelay(d time.Duration) { p.delay.Store(int64(d)) }

// SetReplyJitter makes each chunk's reply delay uniform in delay ± j (never
// below zero) from now on. Order is kept: a chunk never overtakes an
// earlier one.
func (p *Proxy) SetReplyJitter(j time.Duration) { p.jitter.Store(int64(j)) }

// SetBlackhole, while on, holds every byte in both directions and every
// new connection (accepted, but nothing reaches the backend): a network
// partition where TCP keeps retransmitting. Turned off, the held traffic
// flows again, in order, on the connections still open.
func (p *Proxy) SetBlackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.held == nil:
		p.held = make(chan struct{})
	case !on && p.held != nil:
		close(p.held)
		p.held = nil
	}
}

// pass waits while the proxy is blackholed.
func (p *Proxy) pass() {
	p.mu.Lock()
	h := p.held
	p.mu.Unlock()
	if h != nil {
		<-h
	}
}

// chunkDelay is the reply delay for a chunk read now.
func (p *Proxy) chunkDelay() time.Duration {
	d := p.delay.Load()
	if j := p.jitter.Load(); j > 0 {
		d += rand.Int64N(2*j+1) - j
	}
	return time.Duration(max(0, d))
}

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
	p.SetBlackhole(false)
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
	p.pass()
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
		io.Copy(heldWriter{backend, p}, &scriptCounter{r: client, p: p})
		backend.CloseWrite()
	})
	p.delayedCopy(client, backend)
	client.CloseWrite()
	wg.Wait()
}

// heldWriter writes to w once the proxy is not blackholed.
type heldWriter struct {
	w io.Writer
	p *Proxy
}

func (h heldWriter) Write(b []byte) (int, error) {
	h.p.pass()
	return h.w.Write(b)
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
				ch <- chunk{time.Now().Add(p.chunkDelay()), buf[:n]}
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
		p.pass()
		if _, err := dst.Write(c.data); err != nil {
			src.Close() // unblock the reader
			for range ch {
			}
			return
		}
	}
}

// scriptCounter counts the EVAL and EVALSHA commands (RESP bulk strings)
// in what it reads, EVALSHA by script SHA.
type scriptCounter struct {
	r    io.Reader
	p    *Proxy
	tail []byte // the end of the previous read, for a command split across reads
}

var (
	evalToken    = []byte("$4\r\nEVAL\r\n")
	evalshaToken = []byte("$7\r\nEVALSHA\r\n$40\r\n")
)

// evalshaLen is the length of an EVALSHA token with its SHA and CRLF.
const evalshaLen = 18 + 40 + 2

func (c *scriptCounter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		buf := append(c.tail, b[:n]...)
		// A command is counted in the read where its last byte arrives.
		var shas []string
		evals := 0
		for i := 0; ; {
			j := bytes.Index(buf[i:], evalshaToken)
			if j < 0 {
				break
			}
			p := i + j
			if end := p + evalshaLen; end <= len(buf) && end > len(c.tail) {
				shas = append(shas, string(buf[p+18:p+58]))
			}
			i = p + 1
		}
		for i := 0; ; {
			j := bytes.Index(buf[i:], evalToken)
			if j < 0 {
				break
			}
			p := i + j
			if p+len(evalToken) > len(c.tail) {
				evals++
			}
			i = p + 1
		}
		c.p.count(evals, shas)
		keep := min(len(buf), 64)
		c.tail = append(c.tail[:0:0], buf[len(buf)-keep:]...)
	}
	return n, err
}

func (p *Proxy) count(evals int, shas []string) {
	if evals == 0 && len(shas) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scripts["EVAL"] += int64(evals)
	for _, s := range shas {
		p.scripts[s]++
	}
}

// Scripts returns how many EVAL and EVALSHA commands clients have sent
// through the proxy so far, in all.
func (p *Proxy) Scripts() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, c := range p.scripts {
		n += c
	}
	return n
}

// ScriptsBySHA returns how many EVALSHA commands clients have sent through
// the proxy so far, by script SHA, and the EVAL commands under "EVAL".
func (p *Proxy) ScriptsBySHA() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.scripts)
}
