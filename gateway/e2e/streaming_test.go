package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rssWatch samples a process's RSS every 50 ms until stopped and keeps the
// largest sample.
type rssWatch struct {
	stop chan struct{}
	done chan struct{}
	peak atomic.Int64
}

func watchRSS(t *testing.T, pid int) *rssWatch {
	w := &rssWatch{stop: make(chan struct{}), done: make(chan struct{})}
	w.peak.Store(int64(processRSS(t, pid)))
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			if rss := int64(processRSS(t, pid)); rss > w.peak.Load() {
				w.peak.Store(rss)
			}
		}
	}()
	return w
}

// end stops the sampling and returns the peak.
func (w *rssWatch) end() int64 {
	close(w.stop)
	<-w.done
	return w.peak.Load()
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// rssGrowthBound is how much the gateway process may grow while a body many
// times larger passes through it: its buffers, not the body.
const rssGrowthBound = 48 << 20

// TestStreamingLargeRequestBody: a 1 GiB request body, with a
// Content-Length and chunked, passes through the gateway (with a limit on
// the route) to an upstream that counts its bytes, while the gateway's RSS
// grows by less than rssGrowthBound: the body is streamed, never buffered.
func TestStreamingLargeRequestBody(t *testing.T) {
	var got atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		got.Store(n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d", n)
	}))
	defer up.Close()
	p := start(t, `store: {type: memory}`+header+`
policies:
  many: {algorithm: token_bucket, capacity: 1000, rate: 1000}
routes:
  - id: upload
    match: {path: /upload}
    upstream: `+up.URL+`
    timeout: 50s
    limits: [{policy: many, key: const:all}]
`)
	c := &http.Client{Timeout: 50 * time.Second}
	for _, tt := range []struct {
		name string
		size int64
		cl   int64 // -1: chunked
	}{
		{"Content-Length", 1 << 30, 1 << 30},
		{"chunked", 256 << 20, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := watchRSS(t, p.PID())
			base := w.peak.Load()
			req, err := http.NewRequest("POST", p.base+"/upload", io.NopCloser(io.LimitReader(zeros{}, tt.size)))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = tt.cl
			start := time.Now()
			resp, err := c.Do(req)
			peak := w.end()
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Logf("%d MiB %s: %v, gateway RSS %d MiB before, peak %d MiB", tt.size>>20, tt.name, time.Since(start).Round(time.Millisecond), base>>20, peak>>20)
			if resp.StatusCode != 200 || string(body) != strconv.FormatInt(tt.size, 10) || got.Load() != tt.size {
				t.Fatalf("status %d, body %q, upstream counted %d; want 200 and %d", resp.StatusCode, body, got.Load(), tt.size)
			}
			if grew := peak - base; grew > rssGrowthBound {
				t.Errorf("the gateway grew by %d MiB while streaming %d MiB, want under %d MiB", grew>>20, tt.size>>20, rssGrowthBound>>20)
			}
		})
	}
}

// TestStreamingSlowResponse: an upstream writes a 256 MiB response without
// a Content-Length as fast as it can; the client reads it slowly. The client
// gets its first bytes before the upstream is done, every byte arrives, and
// the gateway's RSS grows by less than rssGrowthBound: it holds back the
// upstream rather than buffering what the client has not read.
func TestStreamingSlowResponse(t *testing.T) {
	const size = 256 << 20
	var sent atomic.Int64
	finished := make(chan struct{})
	var once sync.Once
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer once.Do(func() { close(finished) })
		w.Header().Set("Content-Type", "application/octet-stream")
		chunk := make([]byte, 64<<10)
		for sent.Load() < size {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	p := start(t, `store: {type: memory}`+header+`
policies:
  many: {algorithm: token_bucket, capacity: 1000, rate: 1000}
routes:
  - id: download
    match: {path: /download}
    upstream: `+up.URL+`
    timeout: 50s
    limits: [{policy: many, key: const:all}]
`)
	w := watchRSS(t, p.PID())
	base := w.peak.Load()
	c, err := net.DialTimeout("tcp", hostAddr(p.base), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(50 * time.Second))
	// A small receive buffer, so the kernel does not hold what the gateway
	// would otherwise have to.
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	if _, err := io.WriteString(c, "GET /download HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 64<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.TransferEncoding) == 0 || !strings.EqualFold(resp.TransferEncoding[0], "chunked") {
		t.Fatalf("status %d, transfer encoding %q; want 200, chunked", resp.StatusCode, resp.TransferEncoding)
	}
	start := time.Now()
	var read int64
	buf := make([]byte, 64<<10)
	firstBeforeDone := false
	for {
		n, err := resp.Body.Read(buf)
		if read == 0 && n > 0 {
			select {
			case <-finished:
			default:
				firstBeforeDone = true
			}
		}
		read += int64(n)
		if read%(4<<20) < int64(n) {
			time.Sleep(10 * time.Millisecond) // a slow reader: about 0.6 s of pauses over the body
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", read, err)
		}
	}
	peak := w.end()
	t.Logf("%d MiB to a slow reader: %v, gateway RSS %d MiB before, peak %d MiB", read>>20, time.Since(start).Round(time.Millisecond), base>>20, peak>>20)
	if read != size {
		t.Errorf("read %d bytes, want %d", read, size)
	}
	if !firstBeforeDone {
		t.Errorf("the first bytes arrived only after the upstream had written everything: not streamed")
	}
	if grew := peak - base; grew > rssGrowthBound {
		t.Errorf("the gateway grew by %d MiB while streaming %d MiB, want under %d MiB", grew>>20, size>>20, rssGrowthBound>>20)
	}
}
