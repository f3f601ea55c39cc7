package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tlsProto is the protocol a TLS cell's client speaks.
type tlsProto int

const (
	protoNone   tlsProto = iota // a cleartext cell, loaded by wrk
	protoH2                     // HTTP/2 over TLS, chosen by ALPN
	protoHTTPS1                 // HTTP/1.1 over TLS (h2load --h1)
)

// alpn is the protocol h2load must report having negotiated.
func (p tlsProto) alpn() string {
	if p == protoH2 {
		return "h2"
	}
	return "http/1.1"
}

// String names the protocol in the report.
func (p tlsProto) String() string {
	switch p {
	case protoH2:
		return "HTTP/2"
	case protoHTTPS1:
		return "HTTP/1.1"
	}
	return "cleartext HTTP/1.1"
}

// userQuery is the query parameter that carries the user in the TLS cells:
// h2load sends the same headers with every request, but walks a list of
// URIs, so the user is in the URI and the limits are keyed on it.
const userQuery = "user"

// writeURIList writes the list of request URIs h2load walks, one per user
// in 1..users in a shuffled order, to dir; it returns the file's path.
// Every connection walks the list from its start, in the same order.
func writeURIList(dir string, users int) (string, error) {
	var b strings.Builder
	for _, u := range rand.Perm(users) {
		fmt.Fprintf(&b, "%s?%s=%d\n", requestPath, userQuery, u+1)
	}
	path := filepath.Join(dir, "uris.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("write h2load URI list: %w", err)
	}
	return path, nil
}

// h2loadResult is what one h2load run reported.
type h2loadResult struct {
	// duration is the measured duration (-D, without the warm-up), which
	// h2load's req/s is over.
	duration                                   time.Duration
	rps                                        float64 // h2load's req/s: responses (any status) per second
	total, started, done, succeeded            int64
	failed, errored, timeout                   int64
	status2xx, status3xx, status4xx, status5xx int64
	tlsProtocol, appProtocol                   string
}

// load returns the run's totals in the form the report uses: requests are
// the responses received (any status, as wrk counts them), errors the
// failed requests (errors, timeouts and 4xx/5xx answers, as h2load counts
// them) and the 3xx answers.
func (r h2loadResult) load() wrkResult {
	return wrkResult{requests: r.done - r.errored, duration: r.duration, errors: r.failed + r.status3xx}
}

// trouble describes the run's failures and non-2xx answers, or is empty.
func (r h2loadResult) trouble() string {
	if r.failed == 0 && r.errored == 0 && r.timeout == 0 && r.status3xx+r.status4xx+r.status5xx == 0 {
		return ""
	}
	return fmt.Sprintf("%d done, %d succeeded, %d failed, %d errored, %d timeout; status codes %d 2xx, %d 3xx, %d 4xx, %d 5xx",
		r.done, r.succeeded, r.failed, r.errored, r.timeout, r.status2xx, r.status3xx, r.status4xx, r.status5xx)
}

// The lines of h2load's output that parseH2load reads.
var (
	h2loadFinishedRE = regexp.MustCompile(`(?m)^finished in [0-9.]+(?:us|ms|s), ([0-9.]+) req/s`)
	h2loadRequestsRE = regexp.MustCompile(`(?m)^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2loadStatusRE   = regexp.MustCompile(`(?m)^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
	h2loadTLSRE      = regexp.MustCompile(`(?m)^TLS Protocol: (\S+)`)
	h2loadAppRE      = regexp.MustCompile(`(?m)^Application protocol: (\S+)`)
)

// h2loadMainStarted starts the line each h2load thread prints when its
// measured duration starts (after the warm-up).
const h2loadMainStarted = "Main benchmark duration is started for thread #"

// parseH2load reads h2load's summary of a run whose measured duration
// was d ("finished in" counts the warm-up too). The TLS and application
// protocols are empty when h2load did not print them (no connection was
// made).
func parseH2load(out string, d time.Duration) (h2loadResult, error) {
	r := h2loadResult{duration: d}
	f := h2loadFinishedRE.FindStringSubmatch(out)
	q := h2loadRequestsRE.FindStringSubmatch(out)
	s := h2loadStatusRE.FindStringSubmatch(out)
	if f == nil || q == nil || s == nil {
		return r, fmt.Errorf("no summary in h2load's output:\n%s", out)
	}
	var err error
	if r.rps, err = strconv.ParseFloat(f[1], 64); err != nil {
		return r, fmt.Errorf("h2load req/s %q: %w", f[0], err)
	}
	var n []int64
	for _, v := range append(q[1:], s[1:]...) {
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return r, fmt.Errorf("h2load count %q: %w", v, err)
		}
		n = append(n, i)
	}
	r.total, r.started, r.done, r.succeeded, r.failed, r.errored, r.timeout = n[0], n[1], n[2], n[3], n[4], n[5], n[6]
	r.status2xx, r.status3xx, r.status4xx, r.status5xx = n[7], n[8], n[9], n[10]
	if m := h2loadTLSRE.FindStringSubmatch(out); m != nil {
		r.tlsProtocol = m[1]
	}
	if m := h2loadAppRE.FindStringSubmatch(out); m != nil {
		r.appProtocol = m[1]
	}
	return r, nil
}

// h2loadRunner runs h2load over the URI list with fixed threads and, per
// protocol, fixed connections and streams.
type h2loadRunner struct {
	bin     string
	threads int
	uris    string // path of the URI list
	// h2Conns and h2Streams are the HTTP/2 connections and the streams
	// each keeps in flight; https1Conns the HTTP/1.1 connections (one
	// request in flight each, no pipelining).
	h2Conns, h2Streams, https1Conns int
}

// args are h2load's arguments for a run of proto against base
// ("https://host:port") with warmup (which may be 0) before d.
func (h *h2loadRunner) args(proto tlsProto, base string, warmup, d time.Duration) []string {
	conns, streams := h.h2Conns, h.h2Streams
	if proto == protoHTTPS1 {
		conns, streams = h.https1Conns, 1
	}
	args := []string{"-t", strconv.Itoa(h.threads), "-c", strconv.Itoa(conns), "-m", strconv.Itoa(streams),
		"-D", strconv.Itoa(int(d / time.Second))}
	if warmup > 0 {
		args = append(args, "--warm-up-time", strconv.Itoa(int(warmup/time.Second)))
	}
	if proto == protoHTTPS1 {
		args = append(args, "--h1")
	}
	return append(args, "-B", base, "-i", h.uris)
}

// run loads base with proto for warmup and then d (whole seconds) on the
// same connections, and returns h2load's summary. measuring is called
// once, when every h2load thread has started its measured duration; it is
// not called when one never does. h2load is killed if it runs 30 s past
// warmup+d or ctx ends. A run that negotiated another protocol than proto
// or another TLS version than 1.3 is an error.
func (h *h2loadRunner) run(ctx context.Context, proto tlsProto, base string, warmup, d time.Duration, measuring func()) (h2loadResult, error) {
	ctx, cancel := context.WithTimeout(ctx, warmup+d+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, h.args(proto, base, warmup, d)...)
	setDeathSignal(cmd, syscall.SIGKILL)
	var out lockedBuffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, pw), &out
	if err := cmd.Start(); err != nil {
		return h2loadResult{}, fmt.Errorf("start h2load: %w", err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		started := 0
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), h2loadMainStarted) {
				if started++; started == h.threads && measuring != nil {
					measuring()
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-scanned
	if err != nil {
		if ctx.Err() != nil {
			return h2loadResult{}, fmt.Errorf("h2load %s: %w", base, ctx.Err())
		}
		return h2loadResult{}, fmt.Errorf("h2load %s: %w: %s", base, err, out.String())
	}
	r, err := parseH2load(out.String(), d)
	if err != nil {
		return r, err
	}
	// h2load's req/s is its successful streams over the measured duration:
	// the figure the report derives must agree, or the duration is not d.
	if got := r.load().rps(); math.Abs(got-r.rps) > 0.01*r.rps {
		return r, fmt.Errorf("h2load %s: %d requests over %v are %.0f req/s, but h2load says %.0f:\n%s", base, r.load().requests, d, got, r.rps, out.String())
	}
	if r.done > 0 && r.appProtocol != proto.alpn() {
		return r, fmt.Errorf("h2load %s negotiated %s, want %s:\n%s", base, r.appProtocol, proto.alpn(), out.String())
	}
	if r.done > 0 && r.tlsProtocol != "TLSv1.3" {
		return r, fmt.Errorf("h2load %s negotiated %s, want TLSv1.3:\n%s", base, r.tlsProtocol, out.String())
	}
	return r, nil
}

// h2loadVersion returns `h2load --version`, such as "h2load nghttp2/1.52.0".
func h2loadVersion(bin string) string {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return "unknown"
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return first
}

// lockedBuffer is a strings.Builder safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
