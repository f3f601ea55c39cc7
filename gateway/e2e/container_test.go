package e2e

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// readDockerfile returns the instructions of the repository's Dockerfile.
func readDockerfile(t *testing.T) []instruction {
	t.Helper()
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// scriptBuilds runs the builds of scripts/build.sh one at a time: they
// compile the same packages with the same flags, so the second finds them
// in the build cache instead of compiling them again beside the first.
var scriptBuilds sync.Mutex

// buildScript runs scripts/build.sh, the build recipe the Dockerfile and
// scripts/release.sh share, into dir with VERSION and COMMIT set.
func buildScript(t *testing.T, dir, version, commit string) string {
	t.Helper()
	bin := filepath.Join(dir, "sluice")
	cmd := exec.Command("../../scripts/build.sh", bin)
	cmd.Env = append(os.Environ(), "VERSION="+version, "COMMIT="+commit)
	scriptBuilds.Lock()
	out, err := cmd.CombinedOutput()
	scriptBuilds.Unlock()
	if err != nil {
		t.Fatalf("scripts/build.sh: %v\n%s", err, out)
	}
	return bin
}

// TestContainerBinary checks the container recipe without a Docker engine:
// the Dockerfile builds with scripts/build.sh on
// golang:1.26, runs as a non-root user, exposes 8080 and 9090 and has no
// HEALTHCHECK; the binary that script builds is static; and the image's
// default config, at the path the image's CMD names, listens on :8080 and
// :9090, passes `sluice check` and serves /healthz, /readyz and its route
// when run (its listen addresses moved to free ports through the
// SLUICE_LISTEN and SLUICE_ADMIN_LISTEN variables it documents).
func TestContainerBinary(t *testing.T) {
	t.Parallel()
	var (
		runsScript, builderOK, healthcheck bool
		user, cmdJSON, configSrc, dest     string
		exposed                            []string
	)
	for _, in := range readDockerfile(t) {
		switch in.cmd {
		case "FROM":
			if strings.HasPrefix(in.args, "golang:1.26 ") {
				builderOK = true
			}
		case "RUN":
			if strings.Contains(in.args, "scripts/build.sh") {
				runsScript = true
			}
		case "COPY":
			if f := strings.Fields(in.args); len(f) == 2 && strings.HasSuffix(f[0], ".yaml") {
				configSrc, dest = f[0], f[1]
			}
		case "USER":
			user = in.args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case "CMD":
			cmdJSON = in.args
		case "HEALTHCHECK":
			healthcheck = true
		}
	}
	if !builderOK {
		t.Error("the Dockerfile's build stage is not FROM golang:1.26")
	}
	if !runsScript {
		t.Error("the Dockerfile does not build with scripts/build.sh, so this test does not check its binary")
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		t.Errorf("the image's USER is %q, want a non-root user", user)
	}
	if healthcheck {
		t.Error("the Dockerfile has a HEALTHCHECK; probes belong to the orchestrator")
	}
	slices.Sort(exposed)
	if !slices.Equal(exposed, []string{"8080", "9090"}) {
		t.Errorf("EXPOSE %v, want 8080 9090", exposed)
	}
	var cmdArgs []string
	if err := json.Unmarshal([]byte(cmdJSON), &cmdArgs); err != nil {
		t.Fatalf("CMD %s is not an exec-form JSON array: %v", cmdJSON, err)
	}
	if i := slices.Index(cmdArgs, "--config"); configSrc == "" || i < 0 || i+1 >= len(cmdArgs) || cmdArgs[i+1] != dest {
		t.Fatalf("CMD %v does not serve the config the image copies (%s to %s)", cmdArgs, configSrc, dest)
	}
	configFile := filepath.Join("..", "..", configSrc)

	// The defaults listen where the image says it does.
	cfg, err := config.Load(configFile, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Listen != ":8080" || cfg.Admin.Listen != ":9090" {
		t.Errorf("%s listens on %q and %q, want :8080 and :9090", configSrc, cfg.Server.Listen, cfg.Admin.Listen)
	}

	bin := buildScript(t, t.TempDir(), "v0.0.0-container", "c0ffee")
	assertStatic(t, bin)
	if out, err := exec.Command(bin, "check", "--config", configFile).CombinedOutput(); err != nil {
		t.Errorf("sluice check --config %s: %v\n%s", configSrc, err, out)
	}
	sp, err := sluicetest.Start(bin, sluicetest.Options{
		Args: []string{"serve", "--config", configFile},
		Env:  append(os.Environ(), "SLUICE_LISTEN=127.0.0.1:0", "SLUICE_ADMIN_LISTEN=127.0.0.1:0"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		if code := sp.Stop(20 * time.Second); code != 0 {
			t.Errorf("the static binary exited with %d after SIGTERM, want 0\n%s", code, sp.Logs())
		}
	})
	for _, u := range []string{sp.Admin + "/healthz", sp.Admin + "/readyz", sp.Base + "/hello"} {
		if r := get(t, u); r.code != 200 {
			t.Errorf("GET %s: %d %q, want 200", u, r.code, r.body)
		}
	}
}

// assertStatic fails unless bin is an ELF executable with no program
// interpreter and no shared libraries: it runs on scratch or distroless.
func assertStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: not a static binary", bin, p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", bin, libs)
	}
}

// TestReleaseScript runs scripts/release.sh, the stand-in for
// .goreleaser.yaml, for this machine's target: the
// archive holds a binary whose `sluice version` prints the stamped version
// and commit, with the license and docs beside it, and the checksum file
// names the archive. The other targets use the same script and flags; one
// target keeps the test short.
func TestReleaseScript(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("tar is not installed")
	}
	dist := t.TempDir()
	target := runtime.GOOS + "/" + runtime.GOARCH
	cmd := exec.Command("../../scripts/release.sh", dist)
	cmd.Env = append(os.Environ(), "VERSION=v9.8.7-test", "COMMIT=0123456789ab", "TARGETS="+target)
	scriptBuilds.Lock()
	out, err := cmd.CombinedOutput()
	scriptBuilds.Unlock()
	if err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, out)
	}
	name := "sluice_9.8.7-test_" + runtime.GOOS + "_" + runtime.GOARCH
	unpacked := t.TempDir()
	if out, err := exec.Command("tar", "-C", unpacked, "-xzf", filepath.Join(dist, name+".tar.gz")).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	for _, f := range []string{"sluice", "LICENSE", "NOTICE", "README.md", "CHANGELOG.md"} {
		if _, err := os.Stat(filepath.Join(unpacked, name, f)); err != nil {
			t.Errorf("the archive lacks %s: %v", f, err)
		}
	}
	bin := filepath.Join(unpacked, name, "sluice")
	assertStatic(t, bin)
	out, err = exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "sluice v9.8.7-test 0123456789ab " + runtime.Version() + "\n"
	if string(out) != want {
		t.Errorf("sluice version = %q, want %q", out, want)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "sluice_9.8.7-test_checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sums), " "+name+".tar.gz\n") {
		t.Errorf("the checksum file does not name %s.tar.gz:\n%s", name, sums)
	}
}
