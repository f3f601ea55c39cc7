package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEConfigReference keeps the README's configuration reference a
// config that `sluice check` accepts, so the manual never shows a file that
// would not load.
func TestREADMEConfigReference(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	_, after, ok := strings.Cut(text, "## Configuration reference")
	if !ok {
		t.Fatal("README.md has no \"## Configuration reference\" section")
	}
	_, after, ok = strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatal("the configuration reference has no yaml block")
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("unterminated yaml block in the configuration reference")
	}
	file := filepath.Join(t.TempDir(), "reference.yaml")
	if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := Run(t.Context(), []string{"check", "--config", file}, env); code != 0 {
		t.Errorf("sluice check on README's configuration reference: exit %d\n%s", code, errb.String())
	}
}
