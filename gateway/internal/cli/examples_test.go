package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/internal/testcert"
)

// TestShippedConfigsCheck runs `sluice check` on every config the
// repository ships for users to start from: examples/*.yaml and the
// deploy/ configs (the image's default, the Compose ones). Variables count
// as set but empty, so ${NAME:-default} takes its default and ${NAME} is "". Each example opens with
// a comment header saying what it shows, and examples/README.md lists it.
// An example naming TLS files, which the repository does not ship, gives
// in its header the openssl command that makes them; it is checked as a
// copy beside the files that command made (keyCommand, withKeys).
func TestShippedConfigsCheck(t *testing.T) {
	examples, err := filepath.Glob("../../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := filepath.Glob("../../../deploy/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	compose, err := filepath.Glob("../../../deploy/compose/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 7 || len(deploy) == 0 || len(compose) == 0 {
		t.Fatalf("found %d examples, %d deploy configs, %d compose configs: a glob no longer matches", len(examples), len(deploy), len(compose))
	}
	index, err := os.ReadFile("../../../examples/README.md")
	if err != nil {
		t.Fatal(err)
	}
	empty := func(string) (string, bool) { return "", true }
	for _, f := range append(append(examples, deploy...), compose...) {
		name := strings.TrimPrefix(f, "../../../")
		// deploy/*.yaml also holds the Compose files, which are not sluice configs.
		if strings.HasPrefix(filepath.Base(f), "compose.") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			file := f
			if cmd := keyCommand(string(text)); cmd != "" {
				file = withKeys(t, name, text, cmd)
			}
			var out, errb bytes.Buffer
			env := Env{Stdout: &out, Stderr: &errb, LookupEnv: empty}
			if code := Run(t.Context(), []string{"check", "--config", file}, env); code != 0 {
				t.Errorf("sluice check --config %s: exit %d\n%s", name, code, errb.String())
			}
			if !strings.HasPrefix(name, "examples/") {
				return
			}
			if !strings.HasPrefix(string(text), "# ") {
				t.Errorf("%s does not open with a comment header", name)
			}
			if link := "(" + filepath.Base(f) + ")"; !bytes.Contains(index, []byte(link)) {
				t.Errorf("examples/README.md does not link %s", link)
			}
		})
	}
}

// keyCommand returns the command an example's comment header gives to make
// the key and certificate it names (a "# " line running "openssl req"),
// or "".
func keyCommand(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		if l = strings.TrimSpace(strings.TrimPrefix(l, "#")); strings.Contains(l, "openssl req") {
			return l
		}
	}
	return ""
}

// withKeys copies the example name (text) into a temporary tree laid out
// as the repository (examples/ under the root), runs cmd, its header's
// command, from the root, and returns the copy's path. Without openssl on
// the machine, testcert writes a self-signed pair to the same two files.
func withKeys(t *testing.T, name string, text []byte, cmd string) string {
	t.Helper()
	root := t.TempDir()
	file := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, text, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Logf("no openssl (%v); a self-signed pair from testcert stands in for %q", err, cmd)
		dir := filepath.Join(filepath.Dir(file), "tls")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		testcert.SelfSigned(t, dir)
		return file
	}
	c := exec.Command("sh", "-c", cmd)
	c.Dir = root
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("the command of %s's header failed: %v\n%s\n%s", name, err, cmd, out)
	}
	return file
}
