package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The files that tell users what to install or run.
var artefactDocs = []string{"README.md", "docs/deployment.md", "deploy"}

var (
	goInstallRE   = regexp.MustCompile("go install ([^ `@]+)@([^ `\n]+)")
	dockerBuildRE = regexp.MustCompile(`docker build -t ([^ \\\n]+)`)
	imageRE       = regexp.MustCompile(`(?m)^\s*image:\s*"?([^\s"#]+)`)
	sluiceImageRE = regexp.MustCompile(`[A-Za-z0-9.-]+\.[a-z]+(:[0-9]+)?/[^\s"'` + "`" + `]*sluice[^\s"'` + "`" + `]*`)
	scriptRE      = regexp.MustCompile("scripts/[A-Za-z0-9_.-]+")
)

// TestNamedArtefactsAreBuilt keeps README, docs/deployment.md and the
// deploy files from naming what no one can get: a version to go install
// that is not a tag of this repository (DIR/vX.Y.Z for a package of the
// module in DIR; the placeholder vX.Y.Z itself names no version), a sluice image on a registry (none
// is published) or one that no documented docker build produces, a release
// archive without the script that builds it, or a script that is not there.
func TestNamedArtefactsAreBuilt(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	texts := map[string]string{}
	for _, name := range artefactDocs {
		err := filepath.WalkDir(filepath.Join(root, name), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			texts[rel] = string(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var tags []string
	if out, err := exec.Command("git", "-C", root, "tag", "--list").Output(); err == nil {
		tags = strings.Fields(string(out))
	}
	built := map[string]bool{}
	for _, text := range texts {
		for _, m := range dockerBuildRE.FindAllStringSubmatch(text, -1) {
			built[withTag(m[1])] = true
		}
	}
	if len(built) == 0 {
		t.Fatal("no docs name a docker build -t command; the image the manifests name must be built somewhere")
	}
	for name, text := range texts {
		for _, m := range goInstallRE.FindAllStringSubmatch(text, -1) {
			pkg, version := m[1], m[2]
			dir, ok := strings.CutPrefix(pkg, "github.com/sluice-gw/sluice/")
			if !ok {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
				t.Errorf("%s names go install %s, a package the repository does not have", name, pkg)
			}
			if version == versionPlaceholder {
				continue
			}
			// A nested module's version vX.Y.Z is the tag DIR/vX.Y.Z.
			tag := version
			if mod := moduleDir(root, dir); mod != "" {
				tag = mod + "/" + version
			}
			if !slices.Contains(tags, tag) {
				t.Errorf("%s names go install %s@%s, but %q is not a tag of this repository (tags: %v)", name, pkg, version, tag, tags)
			}
		}
		for _, img := range sluiceImageRE.FindAllString(text, -1) {
			if strings.Contains(img, "REGISTRY/") || strings.HasPrefix(img, "github.com/") {
				continue // a push to the reader's own registry; a link to the repository
			}
			t.Errorf("%s names the image %s on a registry; no sluice image is published", name, img)
		}
		for _, m := range imageRE.FindAllStringSubmatch(text, -1) {
			if img := withTag(m[1]); strings.Contains(img, "sluice") && !built[img] {
				t.Errorf("%s runs the image %s, which no documented docker build produces (built: %v)", name, img, keys(built))
			}
		}
		for _, s := range scriptRE.FindAllString(text, -1) {
			if _, err := os.Stat(filepath.Join(root, s)); err != nil {
				t.Errorf("%s names %s, which the repository does not have", name, s)
			}
		}
		if strings.Contains(strings.ToLower(text), "release archive") && !strings.Contains(text, "scripts/release.sh") {
			t.Errorf("%s mentions release archives without scripts/release.sh, which builds them (none is published)", name)
		}
	}
}

// versionPlaceholder stands for a version in a command that shows how a
// tagged release would be installed; it names no version.
const versionPlaceholder = "vX.Y.Z"

// moduleDir returns the directory (relative to root, slash-separated) of
// the nested module that holds the package directory dir, or "" for the
// root module.
func moduleDir(root, dir string) string {
	for d := filepath.ToSlash(dir); d != "." && d != "/" && d != ""; d = filepath.ToSlash(filepath.Dir(d)) {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(d), "go.mod")); err == nil {
			return d
		}
	}
	return ""
}

// withTag adds :latest to an image reference without a tag.
func withTag(img string) string {
	if i := strings.LastIndex(img, ":"); i < 0 || strings.Contains(img[i:], "/") {
		return img + ":latest"
	}
	return img
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
