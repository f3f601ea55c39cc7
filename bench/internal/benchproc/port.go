package benchproc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ReservedPort is the developer's own Redis; the harnesses never use it.
const ReservedPort = 6379

// FreePort returns a loopback TCP port the kernel handed out a moment ago,
// never ReservedPort.
func FreePort() (int, error) {
	for range 10 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if port != ReservedPort {
			return port, nil
		}
	}
	return 0, errors.New("find a free port: only the reserved port came back")
}

// FreePortBelowEphemeral returns a loopback port below the kernel's
// ephemeral range that was free a moment ago (ports in the ephemeral range
// may be taken by outgoing connections). It never returns ReservedPort.
func FreePortBelowEphemeral() (int, error) {
	lo, hi := 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph-12768 >= 1024 {
				lo, hi = eph-12768, eph
			}
		}
	}
	for range 50 {
		p := lo + rand.IntN(hi-lo)
		if p == ReservedPort {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			ln.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free loopback port found")
}
