package benchproc

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

func TestFreePorts(t *testing.T) {
	for name, free := range map[string]func() (int, error){
		"FreePort":               FreePort,
		"FreePortBelowEphemeral": FreePortBelowEphemeral,
	} {
		t.Run(name, func(t *testing.T) {
			port, err := free()
			if err != nil {
				t.Fatal(err)
			}
			if port == ReservedPort || port <= 0 || port > 65535 {
				t.Fatalf("port = %d", port)
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				t.Fatalf("port %d is not free: %v", port, err)
			}
			ln.Close()
		})
	}
}

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

func TestStartRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	r, err := StartRedis(context.Background(), RedisOptions{Bin: bin, TempPrefix: "benchproc-test-"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Port == ReservedPort || r.Addr != net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)) {
		t.Errorf("Addr %q, Port %d", r.Addr, r.Port)
	}
	if err := r.ping(); err != nil {
		t.Errorf("ping: %v", err)
	}
	dir := r.dir
	r.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir %s still there after Stop (stat: %v)", dir, err)
	}
	if err := r.ping(); err == nil {
		t.Error("server still answers after Stop")
	}
}
