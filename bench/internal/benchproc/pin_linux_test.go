package benchproc

import (
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPin pins a child process to CPU 0 and reads the set back from every
// one of its threads.
func TestPin(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := Pin(cmd.Process.Pid, []int{0}); err != nil {
		t.Fatal(err)
	}
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(cmd.Process.Pid, &got); err != nil {
		t.Fatal(err)
	}
	if got.Count() != 1 || !got.IsSet(0) {
		t.Errorf("affinity after Pin(pid, [0]): %d CPUs, CPU 0 set %v; want CPU 0 alone", got.Count(), got.IsSet(0))
	}
	if runtime.NumCPU() > 1 {
		if err := Pin(cmd.Process.Pid, []int{1}); err != nil {
			t.Fatal(err)
		}
		if err := unix.SchedGetaffinity(cmd.Process.Pid, &got); err != nil || got.Count() != 1 || !got.IsSet(1) {
			t.Errorf("affinity after Pin(pid, [1]): %d CPUs (err %v), want CPU 1 alone", got.Count(), err)
		}
	}
	if err := Pin(1<<30, []int{0}); err == nil {
		t.Error("Pin of a process that does not exist: no error")
	}
}
