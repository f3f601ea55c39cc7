package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv(orphanEnv) != "" {
		orphanChild()
		return
	}
	code := m.Run()
	if left := childRedisServers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "redistest: redis-server processes left behind: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// childRedisServers lists the redis-server processes (pid: state) whose
// parent is this test binary, as /proc shows them. After every test has
// cleaned up there must be none, not even zombies. It returns nil where
// there is no /proc.
func childRedisServers() []string {
	if runtime.GOOS != "linux" {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var left []string
	for _, path := range stats {
		pid, comm, state, ppid, ok := readStat(path)
		if ok && ppid == os.Getpid() && comm == binaryName {
			left = append(left, fmt.Sprintf("%d:%s", pid, state))
		}
	}
	return left
}

// readStat parses /proc/PID/stat: "pid (comm) state ppid ...".
func readStat(path string) (pid int, comm, state string, ppid int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, "", "", 0, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return 0, "", "", 0, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 2 {
		return 0, "", "", 0, false
	}
	pid, err1 := strconv.Atoi(strings.TrimSpace(s[:open]))
	ppid, err2 := strconv.Atoi(f[1])
	return pid, s[open+1 : end], f[0], ppid, err1 == nil && err2 == nil
}

// processGone reports whether pid no longer runs: /proc has no entry, or
// only a zombie waiting for its new parent to reap it.
func processGone(pid int) bool {
	_, _, state, _, ok := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	return !ok || state == "Z" || state == "X"
}
