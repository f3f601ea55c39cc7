package browser

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// binary is the sluice executable, built once by TestMain.
var binary string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-browser-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binary, err = sluicetest.Build(dir, os.Getenv("SLUICE_E2E_RACE") == "1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// proc is a running sluice process.
type proc struct {
	base  string // http://public
	admin string // http://admin
	logs  *sluicetest.Log
}

// start runs `sluice serve` on yaml (which should listen on port 0), waits
// until both listeners are bound, and stops it at the end of the test.
func start(t *testing.T, yaml string) *proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := sluicetest.Start(binary, sluicetest.Options{Args: []string{"serve", "--config", path}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		if code := p.Stop(20 * time.Second); code != 0 {
			t.Errorf("sluice exited with %d after SIGTERM, want 0", code)
		}
		if strings.Contains(p.Logs().String(), "DATA RACE") {
			t.Error("the race detector reported a data race in sluice")
		}
		if t.Failed() {
			t.Logf("sluice logs:\n%s", p.Logs())
		}
	})
	return &proc{base: p.Base, admin: p.Admin, logs: p.Logs()}
}

var client = &http.Client{Timeout: 30 * time.Second}

// get sends a GET request; header holds name/value pairs. It fails the
// test when the request cannot be made.
func get(t testing.TB, url string, header ...string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
