package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reloadConfig is a config whose /hello answers body and admits limit
// requests a day. extra is appended at the top level.
func reloadConfig(body string, limit int, extra string) string {
	return adminHeader + extra + `
policies:
  daily: {algorithm: fixed_window, limit: ` + strconv.Itoa(limit) + `, window: 24h}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "` + body + `"}
    limits: [{policy: daily, key: const:all}]
`
}

// brokenReload is a file with an error on line 3 (an unknown policy field).
const brokenReload = `routes:
  - id: hello
    colour: red
    match: {path: /hello}
    respond: {body: "broken"}
`

// TestReloadAdminEndpoint checks a reload through the admin API: POST
// /admin/v1/reload needs the token, reloads (the limit change shows in
// requests), and on a broken file answers 422 with the FILE:LINE:COL
// problems `sluice check` prints while the old config keeps serving; the
// reload metrics and sluice_build_info follow.
func TestReloadAdminEndpoint(t *testing.T) {
	t.Parallel()
	p := start(t, reloadConfig("v1", 1, ""))
	if r := get(t, p.base+"/hello"); r.code != 200 || r.body != "v1" {
		t.Fatalf("first request: %d %q", r.code, r.body)
	}
	if r := get(t, p.base+"/hello"); r.code != 429 {
		t.Fatalf("second request under limit 1: %d, want 429", r.code)
	}
	if got := p.metric("sluice_config_last_reload_successful"); got != "1" {
		t.Errorf("sluice_config_last_reload_successful at start = %q, want 1", got)
	}
	started := p.metric("sluice_config_last_reload_success_timestamp_seconds")
	if v, err := strconv.ParseFloat(started, 64); err != nil || v < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("sluice_config_last_reload_success_timestamp_seconds at start = %q, want the start time", started)
	}
	checkBuildInfo(t, p)

	writeFile(t, p.config, reloadConfig("v2", 5, ""))
	if r := do(t, "POST", p.admin+"/admin/v1/reload", nil); r.code != 401 {
		t.Errorf("reload without the token: %d, want 401", r.code)
	}
	if r := get(t, p.admin+"/admin/v1/reload", auth...); r.code != 405 {
		t.Errorf("GET /admin/v1/reload: %d, want 405", r.code)
	}
	r := do(t, "POST", p.admin+"/admin/v1/reload", nil, auth...)
	var ok struct {
		Status, File string
		Routes       int
	}
	if r.code != 200 || json.Unmarshal([]byte(r.body), &ok) != nil || ok.Status != "reloaded" || ok.File != p.config || ok.Routes != 1 {
		t.Fatalf("reload: %d %s, want 200 {status: reloaded, file: %s, routes: 1}", r.code, r.body, p.config)
	}
	// The same store section: the day's count (1 admitted) is kept, 4 of 5
	// left.
	for i := range 4 {
		if r := get(t, p.base+"/hello"); r.code != 200 || r.body != "v2" {
			t.Fatalf("request %d after the reload to limit 5: %d %q, want 200 v2", i+1, r.code, r.body)
		}
	}
	if r := get(t, p.base+"/hello"); r.code != 429 {
		t.Errorf("sixth request under limit 5: %d, want 429", r.code)
	}

	writeFile(t, p.config, brokenReload)
	r = do(t, "POST", p.admin+"/admin/v1/reload", nil, auth...)
	var problem struct {
		Status int
		Errors []string
	}
	if r.code != 422 || r.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal([]byte(r.body), &problem) != nil ||
		len(problem.Errors) != 1 || !strings.HasPrefix(problem.Errors[0], p.config+":3:5: ") {
		t.Errorf("reload of a broken file: %d %s %s, want 422 problem+json naming %s:3:5", r.code, r.header.Get("Content-Type"), r.body, p.config)
	}
	checkError := exec.Command(binary, "check", "--config", p.config)
	out, _ := checkError.CombinedOutput()
	if len(problem.Errors) == 1 && !strings.Contains(string(out), problem.Errors[0]) {
		t.Errorf("the reload's problem %q is not what sluice check prints:\n%s", problem.Errors[0], out)
	}
	if r := get(t, p.base+"/hello"); r.code != 429 || !strings.Contains(r.body, "daily") {
		t.Errorf("after the broken reload: %d %q, want the running config's 429", r.code, r.body)
	}
	if got := p.metric("sluice_config_last_reload_successful"); got != "0" {
		t.Errorf("sluice_config_last_reload_successful after a failed reload = %q, want 0", got)
	}
	if got := p.metric(`sluice_config_reloads_total{result="failed"}`); got != "1" {
		t.Errorf(`sluice_config_reloads_total{result="failed"} = %q, want 1`, got)
	}
	if !strings.Contains(p.logs.String(), p.config+":3:5:") {
		t.Errorf("the failed reload's log does not name %s:3:5", p.config)
	}
}

// checkBuildInfo checks that sluice_build_info names the build as `sluice
// version` does.
func checkBuildInfo(t *testing.T, p *proc) {
	t.Helper()
	out, err := exec.Command(binary, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out)) // sluice VERSION COMMIT GO
	if len(f) != 4 {
		t.Fatalf("sluice version printed %q", out)
	}
	sample := `sluice_build_info{commit="` + f[2] + `",go="` + f[3] + `",version="` + f[1] + `"}`
	if got := p.metric(sample); got != "1" {
		t.Errorf("%s = %q, want 1", sample, got)
	}
}

// TestReloadWatchConfigMap checks a reload through reload.watch: the
// config lives in a directory laid out as the kubelet lays out a ConfigMap
// volume and is changed the way the kubelet changes it (a new timestamped
// directory, the "..data" symlink replaced by a rename). The running
// gateway picks the new limit up; a broken file is refused, logged with
// FILE:LINE:COL and counted, and the old config keeps serving.
func TestReloadWatchConfigMap(t *testing.T) {
	t.Parallel()
	cm := newConfigMap(t)
	watch := "reload: {watch: true}\n"
	cm.update(reloadConfig("v1", 1, watch))
	p := startFile(t, cm.file)
	p.waitLog("watching the config file", 1)
	if r := get(t, p.base+"/hello"); r.code != 200 || r.body != "v1" {
		t.Fatalf("first request: %d %q", r.code, r.body)
	}
	if r := get(t, p.base+"/hello"); r.code != 429 {
		t.Fatalf("second request under limit 1: %d, want 429", r.code)
	}

	cm.update(reloadConfig("v2", 5, watch))
	p.waitLog("config reloaded", 1)
	if r := get(t, p.base+"/hello"); r.code != 200 || r.body != "v2" {
		t.Fatalf("after the ConfigMap swap to limit 5: %d %q, want 200 v2", r.code, r.body)
	}
	if !strings.Contains(p.logs.String(), "by=\"file watch\"") {
		t.Errorf("the reload's log does not say the file watch asked:\n%s", p.logs)
	}

	cm.update(brokenReload)
	p.waitLog("reload failed", 1)
	if r := get(t, p.base+"/hello"); r.code != 200 || r.body != "v2" {
		t.Errorf("after a broken swap: %d %q, want the running config's 200 v2", r.code, r.body)
	}
	if !strings.Contains(p.logs.String(), cm.file+":3:5:") {
		t.Errorf("the failed reload's log does not name %s:3:5", cm.file)
	}
	if got := p.metric("sluice_config_last_reload_successful"); got != "0" {
		t.Errorf("sluice_config_last_reload_successful after a broken swap = %q, want 0", got)
	}

	// Fixed again: the watch still follows the symlinks.
	cm.update(reloadConfig("v3", 5, watch))
	p.waitLog("config reloaded", 2)
	if r := get(t, p.base+"/hello"); r.body != "v3" {
		t.Errorf("after the fixed swap: %d %q, want v3", r.code, r.body)
	}
	if got := p.metric("sluice_config_last_reload_successful"); got != "1" {
		t.Errorf("sluice_config_last_reload_successful after the fix = %q, want 1", got)
	}
}

// configMap is a directory laid out as a Kubernetes ConfigMap volume:
// sluice.yaml -> ..data/sluice.yaml, ..data -> ..VERSION.
type configMap struct {
	t       *testing.T
	dir     string
	file    string
	version int
}

func newConfigMap(t *testing.T) *configMap {
	dir := t.TempDir()
	file := filepath.Join(dir, "sluice.yaml")
	if err := os.Symlink("..data/sluice.yaml", file); err != nil {
		t.Fatal(err)
	}
	return &configMap{t: t, dir: dir, file: file}
}

// update swaps content in as the kubelet does: a new directory, a new
// symlink renamed over ..data, the old directory removed.
func (c *configMap) update(content string) {
	c.t.Helper()
	c.version++
	name := "..2026_01_01_00_00_00." + strconv.Itoa(c.version)
	if err := os.Mkdir(filepath.Join(c.dir, name), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, name, "sluice.yaml"), []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(name, tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
	if c.version > 1 {
		if err := os.RemoveAll(filepath.Join(c.dir, "..2026_01_01_00_00_00."+strconv.Itoa(c.version-1))); err != nil {
			c.t.Fatal(err)
		}
	}
}
