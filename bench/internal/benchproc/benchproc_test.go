package benchproc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestProcessCPU(t *testing.T) {
	d, ok := ProcessCPU(os.Getpid())
	if runtime.GOOS != "linux" {
		if ok {
			t.Fatal("ProcessCPU reported a time outside Linux")
		}
		return
	}
	if !ok || d < 0 {
		t.Fatalf("ProcessCPU(self) = %v, %v; want a time, true", d, ok)
	}
	if _, ok := ProcessCPU(-1); ok {
		t.Error("ProcessCPU(-1) reported a time")
	}
}

// TestTreeCPU starts a shell whose child spins for a while and checks that
// the child is listed among the shell's descendants and that the tree's CPU
// time includes the child's.
func TestTreeCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, ok := TreeCPU(os.Getpid()); ok {
			t.Fatal("TreeCPU reported a time outside Linux")
		}
		return
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh: %v", err)
	}
	// The shell forks a busy subshell and waits for it; the subshell ends
	// by itself after about 0.3 s of CPU, so nothing outlives the test.
	cmd := exec.Command(sh, "-c", `(i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done) & wait`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, d := range Descendants(cmd.Process.Pid) {
			if p, err := os.FindProcess(d); err == nil {
				p.Kill()
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var kids []int
	for range 100 {
		if kids = Descendants(cmd.Process.Pid); len(kids) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(kids) == 0 {
		t.Fatal("Descendants found no child of a shell that forked one")
	}
	if slices.Contains(kids, cmd.Process.Pid) {
		t.Errorf("Descendants(%d) = %v lists the process itself", cmd.Process.Pid, kids)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		own, ok1 := ProcessCPU(cmd.Process.Pid)
		tree, ok2 := TreeCPU(cmd.Process.Pid)
		if !ok1 || !ok2 {
			t.Fatalf("ProcessCPU ok=%v, TreeCPU ok=%v, want both true", ok1, ok2)
		}
		if tree >= own+50*time.Millisecond {
			return // the busy child's time is counted
		}
		if time.Now().After(deadline) {
			t.Fatalf("TreeCPU = %v, ProcessCPU = %v after 5s: the busy child's time is not counted", tree, own)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWriteReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.md")
	var buf bytes.Buffer
	if err := WriteReport(&buf, "# hi\n", path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != "# hi\n" || string(b) != "# hi\n" {
		t.Errorf("wrote %q and file %q, want both %q", buf.String(), b, "# hi\n")
	}
	buf.Reset()
	if err := WriteReport(&buf, "x", ""); err != nil || buf.String() != "x" {
		t.Errorf("no path: wrote %q, err %v", buf.String(), err)
	}
	if err := WriteReport(&buf, "x", filepath.Join(t.TempDir(), "no", "such", "dir")); err == nil {
		t.Error("unwritable path: no error")
	}
}

func TestParseInts(t *testing.T) {
	if got, err := ParseInts("-conc", "1, 16,64"); err != nil || !slices.Equal(got, []int{1, 16, 64}) {
		t.Errorf("ParseInts(1, 16,64) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1,x", "-2", "1,,2"} {
		if _, err := ParseInts("-conc", bad); err == nil || !strings.Contains(err.Error(), "-conc") {
			t.Errorf("ParseInts(%q) = %v, want an error naming -conc", bad, err)
		}
	}
}
