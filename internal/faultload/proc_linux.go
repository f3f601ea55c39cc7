package faultload

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// fdCount returns how many file descriptors process pid has open, how many
// of them are TCP sockets connected to port on the remote side, and how
// many are TCP sockets with one of http as their local or remote port: the
// process' own listeners and the connections they accepted, and its
// connections to an HTTP server it forwards to. Those come and go with the
// load's concurrency (clients and the proxy's pool keep them alive).
func fdCount(pid, port int, http ...int) (total, toPort, onHTTP int, err error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, 0, err
	}
	inodes := map[string]bool{}
	for _, ent := range ents {
		l, err := os.Readlink(filepath.Join(dir, ent.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	for _, f := range []string{"tcp", "tcp6"} {
		n, m, err := sockets(fmt.Sprintf("/proc/%d/net/%s", pid, f), port, http, inodes)
		if err != nil {
			return 0, 0, 0, err
		}
		toPort += n
		onHTTP += m
	}
	return len(ents), toPort, onHTTP, nil
}

// sockets counts the lines of a /proc/net/tcp table whose inode is in
// inodes and whose remote port is port (n), or whose local or remote port
// is one of http (m).
func sockets(path string, port int, http []int, inodes map[string]bool) (n, m int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	portOf := func(addr string) int {
		_, hex, ok := strings.Cut(addr, ":")
		if !ok {
			return -1
		}
		p, err := strconv.ParseInt(hex, 16, 32)
		if err != nil {
			return -1
		}
		return int(p)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || !inodes[fs[9]] {
			continue // the header, or another process' socket
		}
		if portOf(fs[2]) == port {
			n++
		}
		if slices.Contains(http, portOf(fs[1])) || slices.Contains(http, portOf(fs[2])) {
			m++
		}
	}
	return n, m, sc.Err()
}
