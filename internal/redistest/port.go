package redistest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// reservedPort is the developer's own Redis on this machine; never use it.
const reservedPort = 6379

// portRange returns the range [lo, hi) that FreePort picks from: the ports
// below the kernel's ephemeral range. Ports the kernel hands out for
// 127.0.0.1:0 and for outgoing connections come from the ephemeral range, so
// a client socket could take a port there while a killed server is down and
// make Restart on the same port fail. Ports below that range are only ever
// taken by an explicit bind.
func portRange() (lo, hi int) {
	lo, hi = 20000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	ephLo, err := strconv.Atoi(f[0])
	if err != nil {
		return lo, hi
	}
	if ephLo-1024 >= 4096 {
		return max(1024, ephLo-12768), ephLo
	}
	return lo, hi
}

// FreePort returns a loopback TCP port below the kernel's ephemeral range
// that nobody listened on a moment ago, checked by listening on it and
// closing; it is never 6379. Another process may still take it before the
// caller binds, which is why the starts in this package retry on "Address
// already in use". It falls back to a kernel-chosen port when the range looks
// full. Tests and benchmarks use it for every port they hand to a server,
// sluice's listeners included.
func FreePort() (int, error) {
	lo, hi := portRange()
	for range 50 {
		p := lo + rand.IntN(hi-lo)
		if p == reservedPort {
			continue
		}
		if portFree(p) {
			return p, nil
		}
	}
	for range 10 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("redistest: pick free port: %w", err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if p != reservedPort {
			return p, nil
		}
	}
	return 0, fmt.Errorf("redistest: pick free port: no free port found")
}

// portFree reports whether 127.0.0.1:p can be listened on right now.
func portFree(p int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
