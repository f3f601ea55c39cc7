package cli

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/internal/testcert"
)

// TestCheckTLS: `sluice check` reads the files server.tls names, relative
// to the config file's directory, and reports a key that does not match
// its certificate and a client CA file without a certificate at their
// FILE:LINE:COL; with good files it passes.
func TestCheckTLS(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	ca := testcert.NewCA(t, "check CA")
	ca.WriteCert(t, filepath.Join(certs, "ca.pem"))
	ca.Issue(t, pkix.Name{CommonName: "a.example"}, "a.example").Write(t, filepath.Join(certs, "a.pem"), filepath.Join(certs, "a-key.pem"))
	ca.Issue(t, pkix.Name{CommonName: "b.example"}, "b.example").Write(t, filepath.Join(certs, "b.pem"), filepath.Join(certs, "b-key.pem"))
	if err := os.WriteFile(filepath.Join(certs, "notes.txt"), []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(key, clientCA string) (string, string, int) {
		file := filepath.Join(dir, "sluice.yaml")
		yaml := "server:\n" +
			"  tls:\n" +
			"    listen: \":8443\"\n" +
			"    certificates:\n" +
			"      - cert_file: certs/a.pem\n" +
			"        key_file: " + key + "\n" +
			"    client_ca: " + clientCA + "\n" +
			"routes:\n" +
			"  - {id: a, match: {path: /a}, upstream: \"http://127.0.0.1:1\"}\n"
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return run("check", "--config", file)
	}
	if out, errOut, code := check("certs/a-key.pem", "certs/ca.pem"); code != exitOK || !strings.Contains(out, "sluice.yaml: ok") {
		t.Errorf("check of good files: exit %d\n%s%s", code, out, errOut)
	}
	_, errOut, code := check("certs/b-key.pem", "certs/notes.txt")
	file := filepath.Join(dir, "sluice.yaml")
	want := file + `:6:19: server.tls.certificates[0].key_file: the private key in "` + filepath.Join(certs, "b-key.pem") +
		`" does not match the certificate in "` + filepath.Join(certs, "a.pem") + `"` + "\n" +
		file + `:7:16: server.tls.client_ca: "` + filepath.Join(certs, "notes.txt") +
		`" holds no PEM certificate that parses (a block starting -----BEGIN CERTIFICATE-----)` + "\n"
	if code != exitError || errOut != want {
		t.Errorf("check of a mismatched key and a bad client CA: exit %d, stderr\n%s\nwant\n%s", code, errOut, want)
	}
}
