package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestIdleConnectionsMemoryBounded: 8,000 connections,
// each kept alive and idle after one request with a 16 KB header block,
// must leave sluice under 400 MiB resident with the default settings
// (the shipped Kubernetes limit is 512Mi). The default server.max_conns
// (4096) holds the first ones and answers the rest 503 in problem+json.
// The test logs the resident cost per held connection (docs/operations.md,
// "Connections").
func TestIdleConnectionsMemoryBounded(t *testing.T) {
	const (
		conns    = 8000
		maxConns = 4096 // the default server.max_conns
		rssLimit = 400 << 20
	)
	raiseOpenFiles(t, conns+1024)
	p := start(t, `
server:
  listen: "127.0.0.1:0"
  idle_timeout: 10m
admin:
  listen: "127.0.0.1:0"
store: {type: memory}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "hi\n"}
`)
	get(t, p.base+"/hello")
	pid := p.PID()
	before := processRSS(t, pid)

	addr := hostAddr(p.base)
	request := "GET /hello HTTP/1.1\r\nHost: sluice\r\nX-Pad: " + strings.Repeat("p", 16000) + "\r\n\r\n"
	var (
		mu      sync.Mutex
		held    []net.Conn
		answers = map[int]int{}
		next    = make(chan struct{})
		wg      sync.WaitGroup
	)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 32 {
		wg.Go(func() {
			for range next {
				c, code, err := idleConn(addr, request)
				mu.Lock()
				if err != nil {
					t.Error(err)
				} else {
					answers[code]++
				}
				if code == 200 {
					held = append(held, c)
				}
				mu.Unlock()
			}
		})
	}
	for range conns {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	peak := 0
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		peak = max(peak, processRSS(t, pid))
		time.Sleep(20 * time.Millisecond) // polling another process, bounded
	}
	served := answers[200]
	t.Logf("RSS %d KiB before, peak %d KiB with %d idle connections held (%d KiB per connection); answers: %v",
		before>>10, peak>>10, served, (peak-before)/max(served, 1)>>10, answers)
	if os.Getenv("SLUICE_E2E_RACE") == "1" {
		t.Log("not checking the resident set of a race-enabled build")
	} else if peak > rssLimit {
		t.Errorf("RSS %d MiB with %d connections opened, want under %d MiB", peak>>20, conns, rssLimit>>20)
	}
	if served > maxConns || served+answers[503] != conns {
		t.Errorf("answers %v to %d connections, want at most %d served (200) and the rest refused (503)", answers, conns, maxConns)
	}
}

// idleConn dials addr, sends request and reads the answer. A 200 leaves
// the connection open and idle; any other answer closes it, after checking
// that a 503 is the connection bound's problem+json.
func idleConn(addr, request string) (net.Conn, int, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, 0, err
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		c.Close()
		return nil, 0, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		c.Close()
	}
	if err != nil {
		return nil, 0, err
	}
	if res.StatusCode == 503 && (res.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), "server.max_conns")) {
		return nil, 0, &refusalError{res.Header.Get("Content-Type"), string(body)}
	}
	c.SetDeadline(time.Time{})
	return c, res.StatusCode, nil
}

type refusalError struct{ contentType, body string }

func (e *refusalError) Error() string {
	return "a 503 that is not the connection bound's: Content-Type " + e.contentType + ", body " + e.body
}

// raiseOpenFiles raises this process's soft limit on open files to at
// least n (sluice, started after, inherits it), or skips the test.
func raiseOpenFiles(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot read the open files limit: %v", err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("the open files hard limit is %d, the test needs %d", lim.Max, n)
	}
	old := lim.Cur
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot raise the open files limit to %d: %v", n, err)
	}
	t.Cleanup(func() {
		lim.Cur = old
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	})
}
