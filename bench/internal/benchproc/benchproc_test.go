package benchproc

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
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
