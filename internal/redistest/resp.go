package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// ReplyError is an error reply (a RESP "-" line) from Redis, such as
// "ERR unknown command" or "NOAUTH Authentication required.". [Server.Do]
// returns it as its error when the whole reply is an error; inside an array
// reply it appears as an element. Msg holds the line without the "-".
type ReplyError struct {
	Msg string
}

// Error returns the error line as Redis sent it, without the leading "-".
func (e *ReplyError) Error() string { return e.Msg }

// Prefix returns the first word of the error, such as "ERR", "NOAUTH",
// "LOADING" or "MOVED", which Redis uses as an error code.
func (e *ReplyError) Prefix() string {
	for i := 0; i < len(e.Msg); i++ {
		if e.Msg[i] == ' ' {
			return e.Msg[:i]
		}
	}
	return e.Msg
}

// maxBulk bounds a single bulk string or array length we accept, so a
// corrupt stream cannot make the client allocate without limit.
const maxBulk = 512 << 20

// writeCommand encodes args as a RESP array of bulk strings.
func writeCommand(w *bufio.Writer, args []any) error {
	fmt.Fprintf(w, "*%d\r\n", len(args))
	for _, a := range args {
		var b []byte
		switch v := a.(type) {
		case string:
			b = []byte(v)
		case []byte:
			b = v
		case int:
			b = strconv.AppendInt(nil, int64(v), 10)
		case int64:
			b = strconv.AppendInt(nil, v, 10)
		case uint64:
			b = strconv.AppendUint(nil, v, 10)
		case time.Duration:
			// Redis takes milliseconds for CLIENT PAUSE, PEXPIRE and the like.
			b = strconv.AppendInt(nil, v.Milliseconds(), 10)
		default:
			b = fmt.Append(nil, v)
		}
		fmt.Fprintf(w, "$%d\r\n", len(b))
		w.Write(b)
		w.WriteString("\r\n")
	}
	return w.Flush()
}

// readReply reads one RESP2 reply: a simple string or bulk string becomes a
// string, an integer an int64, an array []any, a null bulk or null array nil,
// and an error reply a *ReplyError value (returned as the value, not as the
// error; the error is only for I/O and protocol failures).
func readReply(r *bufio.Reader) (any, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errors.New("redistest: empty RESP line")
	}
	body := string(line[1:])
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return &ReplyError{Msg: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redistest: bad RESP integer %q", body)
		}
		return n, nil
	case '$':
		n, err := parseLen(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, errors.New("redistest: bulk string not terminated by CRLF")
		}
		return string(buf[:n]), nil
	case '*':
		n, err := parseLen(body)
		if err != nil || n < 0 {
			return nil, err
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return arr, nil
	}
	return nil, fmt.Errorf("redistest: unexpected RESP type byte %q", line[0])
}

// parseLen parses a bulk or array length; -1 means null and yields n < 0.
func parseLen(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 || n > maxBulk {
		return 0, fmt.Errorf("redistest: bad RESP length %q", s)
	}
	return n, nil
}

// readLine reads a CRLF-terminated line and returns it without the CRLF.
// Lines may be longer than r's buffer (a MONITOR line quotes a whole
// script), up to maxBulk bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		buf := append([]byte(nil), line...) // the next read overwrites line
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(buf) > maxBulk {
				return nil, errors.New("redistest: RESP line too long")
			}
			line, err = r.ReadSlice('\n')
			buf = append(buf, line...)
		}
		line = buf
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errors.New("redistest: RESP line not terminated by CRLF")
	}
	return line[:len(line)-2], nil
}

// defaultCommandTimeout bounds a [Server.Do] or [Conn.Do] call whose context
// has no deadline, so a stopped (SIGSTOP) or paused server cannot hang a test.
const defaultCommandTimeout = 5 * time.Second

// Conn is one RESP connection to Redis kept open across commands, for
// callers that must hold connections (to fill maxclients, say) or send many
// control commands; [Server.Do] dials per command instead. Replies are the
// plain Go values [Server.Do] returns. A Conn is not safe for concurrent use.
type Conn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// Dial connects to the Redis server at addr ("host:port", TCP), within ctx
// or 5 seconds when ctx has no deadline, authenticates with password when it
// is not empty, and checks the connection with PING: a server over its
// maxclients cap accepts the connection, answers an error and closes it, so
// Dial returns that error.
func Dial(ctx context.Context, addr, password string) (*Conn, error) {
	return dial(ctx, "tcp", addr, password, true)
}

func dial(ctx context.Context, network, addr, password string, ping bool) (*Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCommandTimeout)
		defer cancel()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{c: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc)}
	if password != "" {
		if _, err := c.DoContext(ctx, "AUTH", password); err != nil {
			c.Close()
			return nil, fmt.Errorf("redistest: auth: %w", err)
		}
	}
	if ping {
		if _, err := c.DoContext(ctx, "PING"); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Do sends one command and reads its reply, giving up after 5 seconds. An
// error reply is returned as a *[ReplyError] error. Arguments are encoded as
// for [Server.Do].
func (c *Conn) Do(args ...any) (any, error) {
	return c.DoContext(context.Background(), args...)
}

// DoContext is [Conn.Do] bounded by ctx instead of the 5-second default when
// ctx has a deadline. It returns ctx.Err() when ctx ends first; the
// connection is then unusable.
func (c *Conn) DoContext(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redistest: empty command")
	}
	return c.exchange(ctx, args)
}

// Receive reads the next reply without sending a command, for the stream a
// server sends after MONITOR or SUBSCRIBE. It waits until ctx ends, or 5
// seconds when ctx has no deadline. An error reply is returned as a
// *[ReplyError] error.
func (c *Conn) Receive(ctx context.Context) (any, error) {
	return c.exchange(ctx, nil)
}

// exchange sends args, unless there are none, and reads one reply.
func (c *Conn) exchange(ctx context.Context, args []any) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCommandTimeout)
		defer cancel()
	}
	// Interrupt I/O only once ctx has ended, so that ctxErr sees ctx.Err().
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if len(args) > 0 {
		if err := writeCommand(c.w, args); err != nil {
			return nil, ctxErr(ctx, err)
		}
	}
	v, err := readReply(c.r)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	if e, ok := v.(*ReplyError); ok {
		return nil, e
	}
	return v, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// roundTrip dials network/addr, authenticates with password when it is not
// empty, sends the command and returns its reply. An error reply to AUTH or
// to the command is returned as the error.
func roundTrip(ctx context.Context, network, addr, password string, args []any) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCommandTimeout)
		defer cancel()
	}
	c, err := dial(ctx, network, addr, password, false)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.DoContext(ctx, args...)
}

// ctxErr returns ctx.Err() untouched when the context ended, since that is
// why the I/O failed, and err otherwise.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}
