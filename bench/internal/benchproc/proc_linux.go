package benchproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat times: USER_HZ, 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// ProcessCPU returns the user+system CPU time process pid has used, from
// /proc/<pid>/stat (10ms resolution). It reports false when that is unknown.
func ProcessCPU(pid int) (time.Duration, bool) {
	f, ok := statFields(pid)
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if !ok || len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}

// statFields returns the fields of /proc/<pid>/stat after the command name
// (which is in parentheses and may hold spaces): the first is field 3,
// the state.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

// TreeCPU returns the user+system CPU time that process pid and all its
// living descendants have used, each read as by [ProcessCPU]: a server
// that runs its work in child processes (nginx's workers) is measured
// whole. It reports false when pid's own time is unknown; a descendant that
// exits between the listing and the read is left out.
func TreeCPU(pid int) (time.Duration, bool) {
	total, ok := ProcessCPU(pid)
	if !ok {
		return 0, false
	}
	for _, d := range Descendants(pid) {
		if t, ok := ProcessCPU(d); ok {
			total += t
		}
	}
	return total, true
}

// Descendants returns the PIDs of the living descendants of process pid
// (children, their children, and so on), from the parent PIDs in
// /proc/<pid>/stat. It returns nil when /proc cannot be read.
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentPID(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parentPID returns field 4 (ppid) of /proc/<pid>/stat.
func parentPID(pid int) (int, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}
