package e2e

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// processRSS returns the resident set size of pid in bytes, from
// /proc/PID/status.
func processRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc to read RSS from: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestHostileUnfinishedHeaderMemory: 100 connections each sending an
// unfinished 1 MiB header line must not make sluice hold 1 MiB per
// connection. server.max_header_bytes bounds what the server reads, so each
// connection gets its 431 after a small multiple of the bound and the
// resident set grows by a few bounds per connection at most.
func TestHostileUnfinishedHeaderMemory(t *testing.T) {
	const (
		conns    = 100
		lineSize = 1 << 20
		bound    = 16 << 10 // the default server.max_header_bytes
	)
	up := newHostileUpstream(t)
	p := start(t, `store: {type: memory}`+header+`
routes:
  - id: api
    match: {path: /api/**}
    upstream: `+up.URL+`
`)
	get(t, p.base+"/api/warm")
	pid := p.PID()
	before := processRSS(t, pid)

	addr := hostAddr(p.base)
	chunk := []byte(strings.Repeat("a", 64<<10))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		held    []net.Conn
		answers = map[string]int{}
	)
	for range conns {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Write([]byte("GET /api/x HTTP/1.1\r\nHost: a\r\nX-Big: ")); err != nil {
				return
			}
			for sent := 0; sent < lineSize; sent += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					break // the server answered and closed: it read no further
				}
			}
		})
	}
	wg.Wait()
	// The server has had every byte it was willing to read; sample its
	// resident set for a moment while the connections stay open.
	peak := 0
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		peak = max(peak, processRSS(t, pid))
		time.Sleep(20 * time.Millisecond) // polling another process, bounded
	}
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		answers[strings.TrimSpace(line)]++
		c.Close()
	}
	growth := peak - before
	t.Logf("RSS %d KiB before, peak %d KiB with %d unfinished 1 MiB header lines (%d KiB per connection); status lines: %v",
		before>>10, peak>>10, conns, growth/conns>>10, answers)
	// A small multiple of the bound per connection, plus the goroutines,
	// buffers and runtime overhead of 100 connections.
	if limit := conns*8*bound + 16<<20; growth > limit {
		t.Errorf("RSS grew by %d KiB, want under %d KiB (8 x max_header_bytes per connection + 16 MiB)", growth>>10, limit>>10)
	}
	if n := answers["HTTP/1.1 431 Request Header Fields Too Large"]; n != conns {
		t.Errorf("%d of %d connections got a 431, want all: %v", n, conns, answers)
	}
}
