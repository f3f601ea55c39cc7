package faultload

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// respConn is one RESP connection the harness keeps open (redistest's Do
// dials per command, which fails once maxclients is reached). Replies are
// read as simple strings, errors, integers or bulk strings; arrays are not
// needed by its callers.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRESP(addr string) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	rc := &respConn{c: c, r: bufio.NewReader(c)}
	// A connection over the cap is accepted, answered an error and closed:
	// PING tells.
	if _, err := rc.do("PING"); err != nil {
		c.Close()
		return nil, err
	}
	return rc, nil
}

// do sends a command and returns the reply as a string.
func (rc *respConn) do(args ...string) (string, error) {
	rc.c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(rc.c, b.String()); err != nil {
		return "", err
	}
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("faultload: empty RESP reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("faultload: unexpected RESP reply %q", line)
}

func (rc *respConn) Close() error { return rc.c.Close() }
