package fastengine

import (
	"bufio"
	"io"
	"testing"

	"github.com/valyala/fasthttp"
)

// halves is a reader that gives its first part, then its second, so a
// bufio.Reader over it holds only the first after one read.
type halves struct{ parts []string }

func (h *halves) Read(p []byte) (int, error) {
	if len(h.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, h.parts[0])
	h.parts[0] = h.parts[0][n:]
	if h.parts[0] == "" {
		h.parts = h.parts[1:]
	}
	return n, nil
}

// TestReadResponseWholeOrStream: a body of known length already buffered
// is read whole, any other streams; interim responses are skipped, and a
// response without a body reads nothing past its headers.
func TestReadResponseWholeOrStream(t *testing.T) {
	for _, tt := range []struct {
		name   string
		parts  []string
		head   bool
		status int
		stream bool
		body   string
		rest   string // what br still holds after the body
	}{
		{name: "buffered", parts: []string{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokNEXT"}, status: 200, body: "ok", rest: "NEXT"},
		{name: "interim then buffered", parts: []string{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}, status: 200, body: "ok"},
		{name: "partly arrived", parts: []string{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123", "456789NEXT"}, status: 200, stream: true, body: "0123456789", rest: "NEXT"},
		{name: "chunked", parts: []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"}, status: 200, stream: true, body: "ok"},
		{name: "head", parts: []string{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nNEXT"}, head: true, status: 200, rest: "NEXT"},
		{name: "no content", parts: []string{"HTTP/1.1 204 No Content\r\n\r\nNEXT"}, status: 204, rest: "NEXT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReader(&halves{parts: append([]string(nil), tt.parts...)})
			var resp fasthttp.Response
			streamed, err := readResponse(br, &resp, tt.head)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode(), tt.status)
			}
			if (streamed != nil) != tt.stream {
				t.Fatalf("streams: %v, want %v", streamed != nil, tt.stream)
			}
			body := ""
			if streamed == nil {
				if resp.BodyStream() != nil {
					t.Fatal("a body read whole left a stream in the response")
				}
				body = string(resp.Body())
			} else {
				if resp.BodyStream() != nil {
					t.Error("the response given holds the stream; the streamed one should")
				}
				if streamed.StatusCode() != tt.status || streamed.Header.ContentLength() != resp.Header.ContentLength() {
					t.Errorf("streamed response: status %d, length %d; want the headers read: %d, %d",
						streamed.StatusCode(), streamed.Header.ContentLength(), tt.status, resp.Header.ContentLength())
				}
				b, err := io.ReadAll(streamed.BodyStream())
				if err != nil {
					t.Fatal(err)
				}
				body = string(b)
				streamed.CloseBodyStream() //nolint:errcheck // read to its end
				fasthttp.ReleaseResponse(streamed)
			}
			if body != tt.body {
				t.Errorf("body %q, want %q", body, tt.body)
			}
			rest, _ := io.ReadAll(br)
			if string(rest) != tt.rest {
				t.Errorf("left %q after the response, want %q", rest, tt.rest)
			}
		})
	}
}
