package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// goreleaserConfig is the part of .goreleaser.yaml the repository uses,
// decoded strictly.
type goreleaserConfig struct {
	Version     int    `json:"version"`
	ProjectName string `json:"project_name"`
	Builds      []struct {
		ID      string   `json:"id"`
		Main    string   `json:"main"`
		Binary  string   `json:"binary"`
		Env     []string `json:"env"`
		Flags   []string `json:"flags"`
		Ldflags []string `json:"ldflags"`
		Goos    []string `json:"goos"`
		Goarch  []string `json:"goarch"`
	} `json:"builds"`
	Archives []struct {
		ID              string   `json:"id"`
		Formats         []string `json:"formats"`
		NameTemplate    string   `json:"name_template"`
		WrapInDirectory bool     `json:"wrap_in_directory"`
		Files           []string `json:"files"`
	} `json:"archives"`
	Checksum struct {
		NameTemplate string `json:"name_template"`
		Algorithm    string `json:"algorithm"`
	} `json:"checksum"`
	Changelog struct {
		Disable bool `json:"disable"`
	} `json:"changelog"`
	Release struct {
		GitHub struct {
			Owner string `json:"owner"`
			Name  string `json:"name"`
		} `json:"github"`
	} `json:"release"`
}

// TestGoreleaserMatchesScripts keeps .goreleaser.yaml and
// scripts/build.sh + scripts/release.sh (which e2e.TestReleaseScript runs)
// in step: the same package, environment, flags and version stamp, the
// same targets, and the same archive contents and names.
func TestGoreleaserMatchesScripts(t *testing.T) {
	data, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var g goreleaserConfig
	if err := yaml.UnmarshalStrict(data, &g); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	build, err := os.ReadFile("../../scripts/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	release, err := os.ReadFile("../../scripts/release.sh")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Builds) != 1 || len(g.Archives) != 1 {
		t.Fatalf(".goreleaser.yaml has %d builds and %d archives, want 1 each", len(g.Builds), len(g.Archives))
	}
	b, a := g.Builds[0], g.Archives[0]

	// build.sh: `CGO_ENABLED=0 exec go build -trimpath -ldflags "..." -o "$out" ./gateway/cmd/sluice`.
	m := regexp.MustCompile(`(?s)\npkg=(\S+)\n(CGO_ENABLED=0) exec go build (-trimpath) \\\s*-ldflags "([^"]+)" \\\s*-o "\$out" (\S+)\n`).FindSubmatch(build)
	if m == nil {
		t.Fatal("scripts/build.sh no longer has the shape this test reads; update both")
	}
	pkg, env, flag, ldflags, main := string(m[1]), string(m[2]), string(m[3]), string(m[4]), string(m[5])
	ldflags = strings.NewReplacer("$pkg", pkg, "${VERSION:-dev}", "{{ .Tag }}", "${COMMIT:-unknown}", "{{ .ShortCommit }}").Replace(ldflags)
	if b.Main != main || !slices.Equal(b.Env, []string{env}) || !slices.Equal(b.Flags, []string{flag}) {
		t.Errorf("goreleaser builds %s with env %v and flags %v; build.sh builds %s with %s and %s", b.Main, b.Env, b.Flags, main, env, flag)
	}
	if !slices.Equal(b.Ldflags, []string{ldflags}) {
		t.Errorf("goreleaser ldflags %q; build.sh's are %q", b.Ldflags, ldflags)
	}

	// release.sh: the default targets, the archive's files and names.
	var targets []string
	for _, goos := range b.Goos {
		for _, arch := range b.Goarch {
			targets = append(targets, goos+"/"+arch)
		}
	}
	tm := regexp.MustCompile(`TARGETS=\$\{TARGETS:-([^}]+)\}`).FindSubmatch(release)
	if tm == nil || !sameSet(strings.Fields(string(tm[1])), targets) {
		t.Errorf("release.sh's default targets %q differ from goreleaser's %v", tm, targets)
	}
	if !slices.Equal(b.Goos, []string{"linux", "darwin"}) || !slices.Equal(b.Goarch, []string{"amd64", "arm64"}) {
		t.Errorf("goreleaser builds %v × %v, want linux and darwin on amd64 and arm64", b.Goos, b.Goarch)
	}
	if !strings.Contains(string(release), `cp "$root/`+strings.Join(a.Files, `" "$root/`)+`" "$dist/$dir/"`) {
		t.Errorf("release.sh does not pack goreleaser's files %v", a.Files)
	}
	if a.NameTemplate != "{{ .ProjectName }}_{{ .Version }}_{{ .Os }}_{{ .Arch }}" || !a.WrapInDirectory ||
		!strings.Contains(string(release), "dir=sluice_${name_version}_${GOOS}_${GOARCH}") {
		t.Errorf("archive names differ: goreleaser %q (wrapped %v)", a.NameTemplate, a.WrapInDirectory)
	}
	if g.Checksum.NameTemplate != "{{ .ProjectName }}_{{ .Version }}_checksums.txt" || g.Checksum.Algorithm != "sha256" ||
		!strings.Contains(string(release), `"sluice_${name_version}_checksums.txt"`) {
		t.Errorf("checksum files differ: goreleaser %q %s", g.Checksum.NameTemplate, g.Checksum.Algorithm)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}
