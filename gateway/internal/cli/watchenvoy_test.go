package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const watchEnvoyConfig = `
server: {listen: "127.0.0.1:0", shutdown_timeout: 5s}
admin: {listen: "127.0.0.1:0", token: w4tch}
reload: {watch: true}
rls: {listen: "127.0.0.1:0", envoy_config: [shop.yaml, more]}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "hi"}
`

// envoyFile is an envoyproxy/ratelimit file of domain with n descriptors.
func envoyFile(domain string, n int) string {
	var b strings.Builder
	b.WriteString("domain: " + domain + "\ndescriptors:\n")
	for i := range n {
		b.WriteString("  - {key: k" + string(rune('a'+i)) + ", rate_limit: {unit: minute, requests_per_unit: 5}}\n")
	}
	return b.String()
}

// replaceFile writes data to path in one rename, as editors save.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestServeWatchesEnvoyConfig: with reload.watch on, an
// edit of an rls.envoy_config file (given as a file or found in a
// directory) reloads the configuration, without SIGHUP.
func TestServeWatchesEnvoyConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.MkdirAll(filepath.Join(dir, "more"), 0o755); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, filepath.Join(dir, "shop.yaml"), envoyFile("shop", 1))
	replaceFile(t, filepath.Join(dir, "more", "search.yaml"), envoyFile("search", 1))
	replaceFile(t, path, watchEnvoyConfig)

	sigs := make(chan os.Signal)
	addrs := make(chan [2]string, 1)
	var logs lockedBuffer
	done := make(chan int)
	go func() {
		done <- Run(context.Background(), []string{"serve", "--config", path}, Env{
			Stdout: io.Discard, Stderr: &logs, LookupEnv: noEnv, Signals: sigs,
			Started: func(public, admin string) { addrs <- [2]string{public, admin} },
		})
	}()
	var admin string
	select {
	case a := <-addrs:
		admin = "http://" + a[1]
	case code := <-done:
		t.Fatalf("serve exited with %d:\n%s", code, logs.String())
	}
	t.Cleanup(func() {
		sigs <- syscall.SIGTERM
		<-done
	})
	waitFor(t, &logs, "watching the config file", func() bool { return strings.Contains(logs.String(), "watching the config file") })

	// effective reports the descriptors sluice has read for domain.
	effective := func(domain string) string {
		req, _ := http.NewRequest("GET", admin+"/admin/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer w4tch")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body := strings.ReplaceAll(string(b), `\"`, `"`)
		i := strings.Index(body, `# domain "`+domain+`" from`)
		if i < 0 {
			return ""
		}
		line, _, _ := strings.Cut(body[i:], `\n`)
		return line[strings.LastIndex(line, ": ")+2:]
	}
	want := func(what, domain, n string) {
		t.Helper()
		waitFor(t, &logs, what, func() bool { return effective(domain) == n })
	}
	want("the files at start", "shop", "1 descriptor")

	replaceFile(t, filepath.Join(dir, "shop.yaml"), envoyFile("shop", 3))
	want("an edit of an envoy_config file", "shop", "3 descriptors")

	replaceFile(t, filepath.Join(dir, "more", "search.yaml"), envoyFile("search", 2))
	want("an edit of a file in an envoy_config directory", "search", "2 descriptors")

	replaceFile(t, filepath.Join(dir, "shop.yaml"), "domain: shop\ndescriptors: [{key: a, colour: red}]\n")
	waitFor(t, &logs, "the broken file's reload failure", func() bool { return strings.Contains(logs.String(), "reload failed") })
	replaceFile(t, filepath.Join(dir, "shop.yaml"), envoyFile("shop", 2))
	want("the fixed file", "shop", "2 descriptors")
	// The watched files follow the configuration: a file the reloaded
	// config names is watched from then on.
	replaceFile(t, filepath.Join(dir, "extra.yaml"), envoyFile("extra", 1))
	replaceFile(t, path, strings.Replace(watchEnvoyConfig, "[shop.yaml, more]", "[shop.yaml, extra.yaml]", 1))
	want("a file the edited config adds", "extra", "1 descriptor")
	replaceFile(t, filepath.Join(dir, "extra.yaml"), envoyFile("extra", 4))
	want("an edit of the added file", "extra", "4 descriptors")
	if !strings.Contains(logs.String(), `by="file watch"`) {
		t.Errorf("the reloads' logs do not say the file watch asked:\n%s", logs.String())
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline with the process log.
func waitFor(t *testing.T, logs *lockedBuffer, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within 20s; log:\n%s", what, logs.String())
		}
		<-tick.C
	}
}
