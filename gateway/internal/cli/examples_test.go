package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedConfigsCheck runs `sluice check` on every config the
// repository ships for users to start from: examples/*.yaml and the
// deploy/ configs (the image's default, the Compose ones). Variables count
// as set but empty, so ${NAME:-default} takes its default and ${NAME} is "". Each example opens with
// a comment header saying what it shows, and examples/README.md lists it.
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
			var out, errb bytes.Buffer
			env := Env{Stdout: &out, Stderr: &errb, LookupEnv: empty}
			if code := Run(t.Context(), []string{"check", "--config", f}, env); code != 0 {
				t.Errorf("sluice check --config %s: exit %d\n%s", name, code, errb.String())
			}
			if !strings.HasPrefix(name, "examples/") {
				return
			}
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
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
