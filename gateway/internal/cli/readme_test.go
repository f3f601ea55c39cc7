package cli

import (
	"bytes"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/internal/testcert"
)

// TestREADMEConfigReference keeps the README's configuration reference a
// config that `sluice check` accepts, so the manual never shows a file that
// would not load.
func TestREADMEConfigReference(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
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
	dir := t.TempDir()
	// The files server.tls names, relative to the file's directory.
	if err := os.Mkdir(filepath.Join(dir, "tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	ca := testcert.NewCA(t, "reference CA")
	ca.WriteCert(t, filepath.Join(dir, "tls", "ca.pem"))
	ca.Issue(t, pkix.Name{CommonName: "localhost"}, "localhost").Write(t, filepath.Join(dir, "tls", "cert.pem"), filepath.Join(dir, "tls", "key.pem"))
	file := filepath.Join(dir, "reference.yaml")
	if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := Run(t.Context(), []string{"check", "--config", file}, env); code != 0 {
		t.Errorf("sluice check on README's configuration reference: exit %d\n%s", code, errb.String())
	}
}

// TestLicense: the repository carries the full Apache
// License 2.0 and the README names it.
func TestLicense(t *testing.T) {
	lic, err := os.ReadFile("../../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	text := string(lic)
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
		"9. Accepting Warranty or Additional Liability.", "END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(text, want) {
			t.Errorf("LICENSE lacks %q: not the full Apache License 2.0", want)
		}
	}
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "[Apache License, Version 2.0](LICENSE)") {
		t.Error("README.md does not name the license")
	}
}
