package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The HTTP/2 side of the door rows: a client that writes HTTP/2 frames
// itself (golang.org/x/net/http2's Framer and hpack), so that a row's raw
// HTTP/1.1 request goes out as the same request in HTTP/2, and a hostile
// client can write what no well-behaved one sends.

// h2Window is the flow-control window the client grants: the largest
// answer of a row fits in it, so the client never has to send
// WINDOW_UPDATE.
const h2Window = 1 << 30

// h2Conn is an HTTP/2 connection to the gateway, h2 over TLS or h2c by
// prior knowledge, past the prefaces and SETTINGS exchange.
type h2Conn struct {
	c      net.Conn
	bw     *bufio.Writer
	fr     *http2.Framer
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	scheme string
	// next is the id of the next stream the client opens.
	next uint32
	// settings are the server's SETTINGS.
	settings map[http2.SettingID]uint32
	// goaway is the GOAWAY the server sent, nil for none.
	goaway *goAway
	// gone is the error the connection ended with, nil while it is open.
	gone error
	// streams are the streams read so far and not yet returned by read.
	streams map[uint32]*h2Stream
}

// goAway is what a GOAWAY frame said.
type goAway struct {
	last uint32 // the last stream the server processes
	code http2.ErrCode
}

// streams is how many client streams the GOAWAY leaves processed: those
// up to its last stream id.
func (g *goAway) streams() uint32 {
	if g == nil {
		return 0
	}
	return (g.last + 1) / 2
}

func (g *goAway) String() string {
	if g == nil {
		return "no GOAWAY"
	}
	return fmt.Sprintf("GOAWAY %v after stream %d", g.code, g.last)
}

// dialH2 opens an HTTP/2 connection of proto (h2 or h2c) to g and
// exchanges SETTINGS.
func dialH2(t *testing.T, g *doorGateway, proto string) *h2Conn {
	t.Helper()
	var c net.Conn
	scheme := "https"
	if proto == protoH2 {
		c = dialTLS(t, g, "h2")
	} else {
		var err error
		if c, err = net.DialTimeout("tcp", g.clear, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		scheme = "http"
	}
	h, err := newH2Conn(c, scheme)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// newH2Conn speaks the client's preface and SETTINGS on c and reads the
// server's SETTINGS, which it acknowledges.
func newH2Conn(c net.Conn, scheme string) (*h2Conn, error) {
	h := &h2Conn{c: c, bw: bufio.NewWriterSize(c, 64<<10), scheme: scheme, next: 1,
		settings: map[http2.SettingID]uint32{}, streams: map[uint32]*h2Stream{}}
	h.fr = http2.NewFramer(h.bw, c)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.fr.MaxHeaderListSize = 1 << 20
	h.enc = hpack.NewEncoder(&h.hbuf)
	h.bw.WriteString(http2.ClientPreface)
	h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2Window})
	h.fr.WriteWindowUpdate(0, h2Window-65535)
	if err := h.bw.Flush(); err != nil {
		return nil, fmt.Errorf("writing the preface: %w", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := h.fr.ReadFrame()
	if err != nil {
		return nil, fmt.Errorf("reading the server's SETTINGS: %w", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return nil, fmt.Errorf("the server opened with %v, want SETTINGS", f)
	}
	h.handle(sf)
	if err := h.bw.Flush(); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *h2Conn) Close() error { return h.c.Close() }

// handle answers the frames of the connection itself (SETTINGS, PING) and
// notes GOAWAY; it reports whether f was one of those.
func (h *h2Conn) handle(f http2.Frame) bool {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			f.ForeachSetting(func(s http2.Setting) error {
				h.settings[s.ID] = s.Val
				return nil
			})
			h.fr.WriteSettingsAck()
		}
		return true
	case *http2.PingFrame:
		if !f.IsAck() {
			h.fr.WritePing(true, f.Data)
		}
		return true
	case *http2.GoAwayFrame:
		h.goaway = &goAway{last: f.LastStreamID, code: f.ErrCode}
		return true
	case *http2.WindowUpdateFrame:
		return true
	}
	return false
}

// h2Request is a request as HTTP/2 sends it.
type h2Request struct {
	method, authority, path string
	// fields are the header fields, names in lower case, in order.
	fields [][2]string
	body   []byte
	// open: the stream stays open after the body (the request announced
	// more body than it carries, as an Expect: 100-continue head does).
	open bool
}

// h2FromRaw translates a raw HTTP/1.1 request: the request line into
// :method and :path, Host into :authority, every other field into a header
// field with its name in lower case, and the bytes after the head into
// the body.
func h2FromRaw(raw string) (h2Request, error) {
	head, body, ok := strings.Cut(raw, "\r\n\r\n")
	if !ok {
		return h2Request{}, errors.New("the raw request has no end of head")
	}
	lines := strings.Split(head, "\r\n")
	parts := strings.Split(lines[0], " ")
	if len(parts) != 3 || parts[2] != "HTTP/1.1" {
		return h2Request{}, fmt.Errorf("request line %q does not translate to HTTP/2", lines[0])
	}
	r := h2Request{method: parts[0], path: parts[1], body: []byte(body)}
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return h2Request{}, fmt.Errorf("header line %q does not translate to HTTP/2", l)
		}
		name, value = strings.ToLower(name), strings.Trim(value, " \t")
		switch name {
		case "host":
			if r.authority != "" {
				return h2Request{}, errors.New("two Host lines do not translate to HTTP/2")
			}
			r.authority = value
			continue
		case "content-length":
			n, err := strconv.Atoi(value)
			if err != nil {
				return h2Request{}, fmt.Errorf("Content-Length %q does not translate to HTTP/2", value)
			}
			r.open = n > len(body)
		}
		r.fields = append(r.fields, [2]string{name, value})
	}
	return r, nil
}

// maxFrame is the frame payload size the client writes: the smallest
// SETTINGS_MAX_FRAME_SIZE a server may have.
const maxFrame = 16384

// send opens a stream with req: HEADERS (and CONTINUATION frames when the
// block is larger than a frame) and the body in DATA frames. It returns
// the stream's id.
func (h *h2Conn) send(req h2Request) (uint32, error) {
	id := h.next
	h.next += 2
	fields := append([][2]string{{":method", req.method}, {":scheme", h.scheme},
		{":authority", req.authority}, {":path", req.path}}, req.fields...)
	block := h.encode(fields)
	endStream := len(req.body) == 0 && !req.open
	first := block[:min(len(block), maxFrame)]
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
		EndStream: endStream, EndHeaders: len(first) == len(block)}); err != nil {
		return id, err
	}
	for rest := block[len(first):]; len(rest) > 0; {
		n := min(len(rest), maxFrame)
		if err := h.fr.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
			return id, err
		}
		rest = rest[n:]
	}
	for b := req.body; len(b) > 0; {
		n := min(len(b), maxFrame)
		if err := h.fr.WriteData(id, n == len(b) && !req.open, b[:n]); err != nil {
			return id, err
		}
		b = b[n:]
	}
	return id, h.bw.Flush()
}

// encode returns the hpack block of fields.
func (h *h2Conn) encode(fields [][2]string) []byte {
	h.hbuf.Reset()
	for _, f := range fields {
		h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return bytes.Clone(h.hbuf.Bytes())
}

// errStreamReset is a stream the server reset.
type errStreamReset struct{ code http2.ErrCode }

func (e errStreamReset) Error() string { return "the server reset the stream: " + e.code.String() }

// h2Stream is what the client has read of one stream.
type h2Stream struct {
	answers []doorAnswer
	body    bytes.Buffer
	done    bool
	err     error
}

// take adds f, a frame of a stream, to what was read of it.
func (h *h2Conn) take(f http2.Frame) {
	id := f.Header().StreamID
	if id == 0 {
		return
	}
	s := h.streams[id]
	if s == nil {
		s = &h2Stream{}
		h.streams[id] = s
	}
	if s.done {
		return
	}
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		status, err := strconv.Atoi(f.PseudoValue("status"))
		switch {
		case len(s.answers) > 0 && s.answers[len(s.answers)-1].status >= 200:
			// Trailers: fold them into the answer.
			for _, hf := range f.RegularFields() {
				s.answers[len(s.answers)-1].header.Add(hf.Name, hf.Value)
			}
		case err != nil:
			s.err, s.done = fmt.Errorf("stream %d: HEADERS without a :status", id), true
			return
		default:
			a := doorAnswer{status: status, proto: "HTTP/2.0", header: http.Header{}}
			for _, hf := range f.RegularFields() {
				a.header.Add(hf.Name, hf.Value)
			}
			s.answers = append(s.answers, a)
		}
		if f.StreamEnded() {
			s.answers[len(s.answers)-1].body = s.body.String()
			s.done = true
		}
	case *http2.DataFrame:
		s.body.Write(f.Data())
		if f.StreamEnded() {
			if len(s.answers) == 0 {
				s.err = fmt.Errorf("stream %d: DATA before HEADERS", id)
			} else {
				s.answers[len(s.answers)-1].body = s.body.String()
			}
			s.done = true
		}
	case *http2.RSTStreamFrame:
		s.err, s.done = errStreamReset{f.ErrCode}, true
	}
}

// read reads the connection's frames until stream id has ended, and
// returns its answers: interim (1xx) ones and the final one, with its
// body. It fails when the stream is reset, the connection ends or is sent
// GOAWAY before the stream, or the stream has not ended within wait.
func (h *h2Conn) read(id uint32, wait time.Duration) ([]doorAnswer, error) {
	deadline := time.Now().Add(wait)
	for {
		if s := h.streams[id]; s != nil && s.done {
			delete(h.streams, id)
			return s.answers, s.err
		}
		var sofar []doorAnswer
		if s := h.streams[id]; s != nil {
			sofar = s.answers
		}
		if h.gone != nil {
			return sofar, h.gone
		}
		if h.goaway != nil && h.goaway.last < id {
			return sofar, fmt.Errorf("GOAWAY %v before stream %d", h.goaway.code, id)
		}
		h.c.SetReadDeadline(deadline)
		f, err := h.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				h.gone = fmt.Errorf("the connection ended: %w", err)
			}
			return sofar, fmt.Errorf("reading stream %d: %w", id, err)
		}
		if h.handle(f) {
			h.bw.Flush()
			continue
		}
		h.take(f)
	}
}

// exchange sends raw, translated by h2FromRaw, on a new stream and reads
// its answers.
func (h *h2Conn) exchange(raw string) ([]doorAnswer, error) {
	req, err := h2FromRaw(raw)
	if err != nil {
		return nil, err
	}
	id, err := h.send(req)
	if err != nil && !isReset(err) {
		return nil, fmt.Errorf("writing stream %d: %w", id, err)
	}
	return h.read(id, 5*time.Second)
}

// closed reports whether the server has sent GOAWAY or closed the
// connection, waiting up to 2 s.
func (h *h2Conn) closed() bool {
	deadline := time.Now().Add(2 * time.Second)
	for h.goaway == nil && h.gone == nil {
		h.c.SetReadDeadline(deadline)
		f, err := h.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return false
			}
			h.gone = err
			break
		}
		if !h.handle(f) {
			h.take(f)
		}
		h.bw.Flush()
	}
	return true
}

// serving reports whether a new stream on the connection is answered: a
// request the path rules refuse (404) before any route, so that no
// upstream sees it.
func (h *h2Conn) serving() bool {
	if h.goaway != nil || h.gone != nil {
		return false
	}
	id, err := h.send(h2Request{method: http.MethodGet, authority: "x", path: "/keep%2Fopen"})
	if err != nil {
		return false
	}
	as, err := h.read(id, 5*time.Second)
	return err == nil && len(as) > 0 && as[len(as)-1].status == http.StatusNotFound
}

// h2Streams is server.http2.max_concurrent_streams of TestHTTP2Doors.
const h2Streams = 5

// h2Config is the config of TestHTTP2Doors: a limited route, an unlimited
// one, and one whose upstream holds each request until it is released.
func h2Config(up string) string {
	return `
server:
  listen: "127.0.0.1:0"
  shutdown_timeout: 10s
  read_header_timeout: 3s
admin:
  listen: "127.0.0.1:0"
policies:
  ten: {algorithm: token_bucket, capacity: 10, rate: 0.0001}
routes:
  - id: api
    match: {path: /api/**}
    upstream: ` + up + `
    timeout: 5s
    limits: [{policy: ten, key: header:X-User-Id}]
  - id: open
    match: {path: /open/**}
    upstream: ` + up + `
    timeout: 5s
  - id: hold
    match: {path: /hold/**}
    upstream: ` + up + `
    timeout: 20s
`
}

// holder is an upstream answer that holds each request to /hold/ until
// released, and counts how many it holds at once.
type holder struct {
	mu       sync.Mutex
	release  chan struct{}
	held     int
	mostHeld int
}

func newHolder() *holder { return &holder{release: make(chan struct{})} }

func (h *holder) answer(req *http.Request, _ []byte) (string, bool) {
	if !strings.HasPrefix(req.URL.Path, "/hold/") {
		return "", false
	}
	h.mu.Lock()
	h.held++
	h.mostHeld = max(h.mostHeld, h.held)
	release := h.release
	h.mu.Unlock()
	select {
	case <-release:
	case <-time.After(15 * time.Second): // bounded: a test that never releases
	}
	h.mu.Lock()
	h.held--
	h.mu.Unlock()
	return "", false
}

// state returns how many requests are held now and the most held at once.
func (h *holder) state() (now, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.mostHeld
}

// open releases what is held and lets every later request through.
func (h *holder) open() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// TestHTTP2Doors: what HTTP/2 brings to the public listener, over h2 and
// h2c alike — a client that resets its streams as fast as it opens them,
// an endless header block, connection-specific header fields, a Host that
// disagrees with :authority, and more streams at once than the server
// allows — is refused or bounded, and the gateway goes on serving.
func TestHTTP2Doors(t *testing.T) {
	t.Parallel()
	var hold atomic.Pointer[holder]
	up := newWireUpstream(t, func(req *http.Request, body []byte) (string, bool) { return hold.Load().answer(req, body) })
	for _, proto := range []string{protoH2, protoH2C} {
		t.Run(proto, func(t *testing.T) {
			hold.Store(newHolder())
			g := startDoors(t, h2Config(up.URL), h2Streams)
			t.Run("settings", func(t *testing.T) { testH2Settings(t, g, proto) })
			t.Run("connection-specific fields", func(t *testing.T) { testH2ConnectionFields(t, g, proto, up) })
			t.Run("authority and Host", func(t *testing.T) { testH2Authority(t, g, proto, up) })
			t.Run("stream limit", func(t *testing.T) { testH2StreamLimit(t, g, proto, up, hold.Load()) })
			t.Run("rapid reset", func(t *testing.T) { testH2RapidReset(t, g, proto, up) })
			t.Run("continuation flood", func(t *testing.T) { testH2ContinuationFlood(t, g, proto) })
		})
	}
}

// h2Get opens a stream with a GET of path on h, with fields, and reads its
// answer.
func h2Get(h *h2Conn, path string, fields ...[2]string) (doorAnswer, error) {
	id, err := h.send(h2Request{method: http.MethodGet, authority: "x", path: path, fields: fields})
	if err != nil {
		return doorAnswer{}, err
	}
	as, err := h.read(id, 5*time.Second)
	if err != nil {
		return doorAnswer{}, err
	}
	return as[len(as)-1], nil
}

// requireServing fails t unless a fresh connection of proto is answered
// within a second.
func requireServing(t *testing.T, g *doorGateway, proto string) {
	t.Helper()
	began := time.Now()
	h := dialH2(t, g, proto)
	defer h.Close()
	a, err := h2Get(h, "/open/probe")
	if err != nil {
		t.Fatalf("a new client is not served: %v", err)
	}
	if a.status != http.StatusOK || time.Since(began) > time.Second {
		t.Errorf("a new client got %d after %v, want 200 within 1s", a.status, time.Since(began))
	}
}

func testH2Settings(t *testing.T, g *doorGateway, proto string) {
	h := dialH2(t, g, proto)
	if got := h.settings[http2.SettingMaxConcurrentStreams]; got != h2Streams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS is %d, want server.http2.max_concurrent_streams %d", got, h2Streams)
	}
}

// testH2ConnectionFields: the connection-specific fields of RFC 9113
// §8.2.2 (and TE other than "trailers") make a request malformed; it is
// refused (a stream reset PROTOCOL_ERROR, or 400) and never forwarded.
func testH2ConnectionFields(t *testing.T, g *doorGateway, proto string, up *wireUpstream) {
	h := dialH2(t, g, proto)
	for _, f := range [][2]string{
		{"connection", "keep-alive"},
		{"keep-alive", "timeout=5"},
		{"proxy-connection", "keep-alive"},
		{"transfer-encoding", "chunked"},
		{"upgrade", "websocket"},
		{"te", "gzip"},
		{"te", "trailers, gzip"},
	} {
		up.reset()
		a, err := h2Get(h, "/open/conn", f, [2]string{"x-user-id", "cf"})
		var rst errStreamReset
		switch {
		case errors.As(err, &rst):
			if rst.code != http2.ErrCodeProtocol {
				t.Errorf("%s: %s: the stream was reset %v, want PROTOCOL_ERROR", f[0], f[1], rst.code)
			}
		case err != nil:
			t.Fatalf("%s: %s: %v", f[0], f[1], err)
		case a.status != http.StatusBadRequest:
			t.Errorf("%s: %s: %d, want 400 or a stream reset PROTOCOL_ERROR", f[0], f[1], a.status)
		}
		if seen := up.wait(0); seen.requests != 0 {
			t.Errorf("%s: %s: the upstream received %d requests, want none:\n%s", f[0], f[1], seen.requests, trunc(seen.bytes))
		}
	}
	// The one TE HTTP/2 allows is served: the refusals above are the
	// fields', not the route's.
	up.reset()
	a, err := h2Get(h, "/open/te", [2]string{"te", "trailers"})
	if err != nil || a.status != http.StatusOK {
		t.Errorf("te: trailers: %d, %v; want 200", a.status, err)
	}
	if seen := up.wait(1); seen.requests != 1 {
		t.Errorf("te: trailers: the upstream received %d requests, want 1", seen.requests)
	}
}

// testH2Authority: a Host field that disagrees with :authority is 400 in
// problem+json and not forwarded; one that agrees is served.
func testH2Authority(t *testing.T, g *doorGateway, proto string, up *wireUpstream) {
	h := dialH2(t, g, proto)
	up.reset()
	a, err := h2Get(h, "/open/host", [2]string{"host", "other.example"})
	if err != nil {
		t.Fatal(err)
	}
	if a.status != http.StatusBadRequest || a.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("Host other.example with :authority x: %d %q, want 400 in application/problem+json", a.status, a.header.Get("Content-Type"))
	}
	if !strings.Contains(a.body, ":authority") {
		t.Errorf("the 400's body %q does not name :authority", a.body)
	}
	if seen := up.wait(0); seen.requests != 0 {
		t.Errorf("the upstream received %d requests, want none", seen.requests)
	}
	up.reset()
	a, err = h2Get(h, "/open/host", [2]string{"host", "x"})
	if err != nil || a.status != http.StatusOK {
		t.Errorf("Host x with :authority x: %d, %v; want 200", a.status, err)
	}
	if seen := up.wait(1); seen.requests != 1 {
		t.Errorf("the upstream received %d requests, want 1", seen.requests)
	}
}

// testH2StreamLimit opens more streams at once than the server allows, to
// an upstream that holds them: no more than the limit reach the upstream
// at once, and each stream past it is refused (RFC 9113 §5.1.2: a stream
// error PROTOCOL_ERROR or REFUSED_STREAM) or served once others end.
func testH2StreamLimit(t *testing.T, g *doorGateway, proto string, up *wireUpstream, hold *holder) {
	up.reset()
	h := dialH2(t, g, proto)
	const streams = h2Streams + 3
	ids := make([]uint32, streams)
	for i := range ids {
		var err error
		if ids[i], err = h.send(h2Request{method: http.MethodGet, authority: "x", path: fmt.Sprintf("/hold/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait (bounded) for the upstream to hold the streams the server let
	// through, and a while longer for any surplus.
	deadline := time.Now().Add(5 * time.Second)
	for now, _ := hold.state(); now < h2Streams && time.Now().Before(deadline); now, _ = hold.state() {
		time.Sleep(10 * time.Millisecond) // polling another process, bounded
	}
	time.Sleep(300 * time.Millisecond)
	held, _ := hold.state()
	if held != h2Streams {
		t.Errorf("the upstream holds %d requests, want the limit %d", held, h2Streams)
	}
	hold.open()
	refused, served := 0, 0
	for _, id := range ids {
		as, err := h.read(id, 10*time.Second)
		var rst errStreamReset
		switch {
		case errors.As(err, &rst) && (rst.code == http2.ErrCodeRefusedStream || rst.code == http2.ErrCodeProtocol):
			refused++
		case err != nil:
			t.Errorf("stream %d: %v", id, err)
		case as[len(as)-1].status == http.StatusOK:
			served++
		default:
			t.Errorf("stream %d: %d, want 200 or refused", id, as[len(as)-1].status)
		}
	}
	_, most := hold.state()
	t.Logf("%s: %d streams opened at once: %d served, %d refused; the upstream held at most %d at once", proto, streams, served, refused, most)
	if most > h2Streams {
		t.Errorf("the upstream held %d requests at once, want at most %d", most, h2Streams)
	}
	if served < h2Streams || served+refused != streams {
		t.Errorf("%d served and %d refused of %d streams, want at least %d served and the rest refused", served, refused, streams, h2Streams)
	}
	if seen := up.wait(served); seen.requests != served {
		t.Errorf("the upstream received %d requests, want the %d served", seen.requests, served)
	}
}

// testH2RapidReset opens streams and resets each at once (CVE-2023-44487),
// rapidReset of them: another client is still served promptly, the
// connection either goes on serving or is sent GOAWAY, and the upstream
// receives no more requests than streams were opened.
func testH2RapidReset(t *testing.T, g *doorGateway, proto string, up *wireUpstream) {
	const rapidReset = 2000
	up.reset()
	h := dialH2(t, g, proto)
	// A reader drains the server's frames meanwhile, noting GOAWAY and
	// the end of the connection.
	type ending struct {
		goaway *goAway
		err    error
	}
	ended := make(chan ending, 1)
	go func() {
		for {
			h.c.SetReadDeadline(time.Now().Add(20 * time.Second))
			f, err := h.fr.ReadFrame()
			if err != nil {
				ended <- ending{err: err}
				return
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				ended <- ending{goaway: &goAway{last: ga.LastStreamID, code: ga.ErrCode}}
				return
			}
		}
	}()
	opened := 0
	var werr error
	for i := 0; i < rapidReset && werr == nil; i++ {
		id := h.next
		h.next += 2
		block := h.encode([][2]string{{":method", "GET"}, {":scheme", h.scheme}, {":authority", "x"}, {":path", "/open/rr"}})
		werr = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
		if werr == nil {
			werr = h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		if i%100 == 99 && werr == nil {
			werr = h.bw.Flush()
		}
		opened++
	}
	if werr == nil {
		werr = h.bw.Flush()
	}
	requireServing(t, g, proto)
	var end ending
	select {
	case end = <-ended:
	case <-time.After(time.Second):
		// Still open: stop the reader and ask for a new stream.
		h.c.SetReadDeadline(time.Now())
		<-ended
		h.c.SetReadDeadline(time.Time{})
		a, err := h2Get(h, "/open/after")
		if err != nil || a.status != http.StatusOK {
			t.Errorf("the connection was not sent GOAWAY, yet a new stream on it got %d, %v; want 200", a.status, err)
		}
		opened++
	}
	time.Sleep(500 * time.Millisecond) // requests still on their way would show here
	seen := up.wait(-1)
	t.Logf("%s: %d streams opened and reset (write error %v); the connection ended with %v, error %v; the upstream received %d requests",
		proto, opened, werr, end.goaway, end.err, seen.requests)
	if seen.requests > opened {
		t.Errorf("the upstream received %d requests for %d streams", seen.requests, opened)
	}
	// Past a GOAWAY's last stream nothing was processed.
	if processed := int(end.goaway.streams()); end.goaway != nil && seen.requests > processed {
		t.Errorf("the upstream received %d requests, more than the %d streams the GOAWAY says were processed", seen.requests, processed)
	}
}

// testH2ContinuationFlood sends a HEADERS frame without END_HEADERS and
// then CONTINUATION frames without end (CVE-2024-27316): the server must
// end the connection long before floodBound bytes, and go on serving
// others.
func testH2ContinuationFlood(t *testing.T, g *doorGateway, proto string) {
	const floodBound = 10 << 20
	h := dialH2(t, g, proto)
	ended := make(chan error, 1)
	go func() {
		for {
			h.c.SetReadDeadline(time.Now().Add(20 * time.Second))
			f, err := h.fr.ReadFrame()
			if err != nil {
				ended <- err
				return
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				ended <- fmt.Errorf("GOAWAY %v", ga.ErrCode)
				return
			}
		}
	}()
	id := h.next
	block := h.encode([][2]string{{":method", "GET"}, {":scheme", h.scheme}, {":authority", "x"}, {":path", "/open/flood"}})
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true}); err != nil {
		t.Fatal(err)
	}
	// Each CONTINUATION carries whole never-indexed fields, so that the
	// server has to decode all of it.
	var fb bytes.Buffer
	enc := hpack.NewEncoder(&fb)
	for fb.Len() < maxFrame-1100 {
		enc.WriteField(hpack.HeaderField{Name: "x-flood", Value: strings.Repeat("a", 1000), Sensitive: true})
	}
	frag := fb.Bytes()
	h.c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	sent := len(block)
	var werr, why error
	for sent < floodBound {
		if werr = h.fr.WriteContinuation(id, false, frag); werr == nil {
			werr = h.bw.Flush()
		}
		if werr != nil {
			break
		}
		sent += len(frag) + 9
		// One frame a millisecond: the server reads each as it comes, so
		// that what was sent when the connection ends is what it read,
		// not what the sockets buffer.
		time.Sleep(time.Millisecond)
		select {
		case why = <-ended:
		default:
		}
		if why != nil {
			break
		}
	}
	if why == nil {
		select {
		case why = <-ended:
		case <-time.After(5 * time.Second):
		}
	}
	t.Logf("%s: %d bytes of header block sent; writing ended with %v; the connection ended with %v", proto, sent, werr, why)
	if why == nil {
		t.Errorf("the connection was neither sent GOAWAY nor closed after %d bytes of one header block", sent)
	}
	if sent >= floodBound {
		t.Errorf("the server read %d bytes of one header block, want it to end the connection well before %d", sent, floodBound)
	}
	requireServing(t, g, proto)
}
