package cli

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const unitFile = "../../../deploy/systemd/sluice.service"

// unitEntries parses a systemd unit file into section -> key -> values (a
// key may repeat), rejecting lines that are neither a section, a key=value
// pair, a comment nor blank.
func unitEntries(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	units := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			units[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, "\\") {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n, line)
			}
			units[section][k] = append(units[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return units
}

// TestSystemdUnit checks deploy/systemd/sluice.service:
// it parses; ExecReload sends SIGHUP, the reload signal; ExecStart runs
// `serve` with flags sluice accepts, checked by running `check` with the
// same flags on a real config; TimeoutStopSec covers the default
// shutdown_timeout. With systemd-analyze installed, `verify` reports
// nothing and `security --offline` rates the hardening at most 2.0.
func TestSystemdUnit(t *testing.T) {
	u := unitEntries(t, unitFile)
	svc := u["Service"]
	if got := svc["ExecReload"]; !slices.Equal(got, []string{"/bin/kill -HUP $MAINPID"}) {
		t.Errorf("ExecReload = %q, want /bin/kill -HUP $MAINPID", got)
	}
	if len(svc["ExecStart"]) != 1 {
		t.Fatalf("ExecStart = %q, want one command", svc["ExecStart"])
	}
	argv := strings.Fields(svc["ExecStart"][0])
	if len(argv) < 2 || !filepath.IsAbs(argv[0]) || argv[1] != "serve" {
		t.Fatalf("ExecStart = %q, want an absolute path to sluice, then serve", svc["ExecStart"][0])
	}
	// The same flags on `check`, with the config path pointing at a real file.
	args := append([]string{"check"}, argv[2:]...)
	i := slices.IndexFunc(args, func(a string) bool { return a == "--config" || a == "-c" })
	if i < 0 || i+1 == len(args) || !filepath.IsAbs(args[i+1]) {
		t.Fatalf("ExecStart %q names no absolute --config path", svc["ExecStart"][0])
	}
	args[i+1] = "../../../deploy/sluice.yaml"
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := Run(t.Context(), args, env); code != 0 {
		t.Errorf("sluice %s: exit %d\n%s", strings.Join(args, " "), code, errb.String())
	}
	if stop := svc["TimeoutStopSec"]; len(stop) != 1 || stopTimeout(stop[0]) <= 15*time.Second {
		t.Errorf("TimeoutStopSec = %q, want more than the default shutdown_timeout (15s)", stop)
	}
	if len(u["Install"]["WantedBy"]) == 0 {
		t.Error("no [Install] WantedBy: systemctl enable would do nothing")
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: the unit was parsed, not verified by systemd")
		return
	}
	// verify wants the binaries to exist: point them at one that does.
	text, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "sluice.service")
	if err := os.WriteFile(copyPath, bytes.ReplaceAll(text, []byte(argv[0]+" "), []byte("/bin/true ")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out2, err := exec.Command(analyze, "security", "--offline=yes", copyPath).CombinedOutput()
	if err != nil {
		t.Logf("systemd-analyze security --offline is not available here: %v", err)
		return
	}
	m := regexp.MustCompile(`Overall exposure level for sluice\.service: ([0-9.]+)`).FindSubmatch(out2)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out2)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2.0 {
		t.Errorf("systemd-analyze security rates the unit's exposure %s, want at most 2.0:\n%s", m[1], out2)
	}
}

// stopTimeout reads a systemd time span of the forms the unit uses ("30s",
// "1min", or bare seconds); anything else is zero.
func stopTimeout(v string) time.Duration {
	v = strings.Replace(v, "min", "m", 1)
	if _, err := strconv.Atoi(v); err == nil {
		v += "s"
	}
	d, _ := time.ParseDuration(v)
	return d
}
