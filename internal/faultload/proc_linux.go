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
// many are TCP sockets on one of local (the process' own listeners and the
// connections they accepted).
func fdCount(pid, port int, local ...int) (total, toPort, onLocal int, err error) {
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
		n, m, err := sockets(fmt.Sprintf("/proc/%d/net/%s", pid, f), port, local, inodes)
		if err != nil {
			return 0, 0, 0, err
		}
		toPort += n
		onLocal += m
	}
	return len(ents), toPort, onLocal, nil
}

// sockets counts the lines of a /proc/net/tcp table whose inode is in
// inodes and whose remote port is port (n) or local port one of local (m).
func sockets(path string, port int, local []int, inodes map[string]bool) (n, m int, err error) {
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
		if slices.Contains(local, portOf(fs[1])) {
			m++
		}
	}
	return n, m, sc.Err()
}
