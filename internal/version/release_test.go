package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's top directory, from this package's.
const root = "../.."

// TestReleaseFilesAgree: VERSION holds a release number (MAJOR.MINOR.PATCH,
// valid for SemVer, Helm and Python alike), and every file that carries
// the release says the same one: the Python package's metadata and
// __version__, the Helm chart's version and appVersion, the manifest
// rendered from the chart, the changelog's heading of it, and the version
// make stamps into the binary (scripts/version.sh), which starts with it.
func TestReleaseFilesAgree(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	release := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`).MatchString(release) {
		t.Fatalf("VERSION holds %q, want MAJOR.MINOR.PATCH", release)
	}
	if string(b) != release+"\n" {
		t.Errorf("VERSION holds %q, want the release and one newline", b)
	}
	for _, c := range []struct {
		file string
		// re finds the release the file carries, its first group.
		re string
	}{
		{"python/pyproject.toml", `(?m)^version = "([^"]*)"$`},
		{"python/raftmaster/__init__.py", `(?m)^__version__ = "([^"]*)"$`},
		{"deploy/helm/raftmaster/Chart.yaml", `(?m)^version: "?([^"\s]*)"?$`},
		{"deploy/helm/raftmaster/Chart.yaml", `(?m)^appVersion: "?([^"\s]*)"?$`},
		{"deploy/kubernetes/raftmaster.yaml", `helm\.sh/chart: raftmaster-(\S*)`},
		{"deploy/kubernetes/raftmaster.yaml", `app\.kubernetes\.io/version: "([^"]*)"`},
		{"CHANGELOG.md", `(?m)^## \[([^\]]*)\] - \d{4}-\d{2}-\d{2}$`},
	} {
		text, err := os.ReadFile(filepath.Join(root, c.file))
		if err != nil {
			t.Fatal(err)
		}
		all := regexp.MustCompile(c.re).FindAllStringSubmatch(string(text), -1)
		if len(all) == 0 {
			t.Errorf("%s: nothing matches %s", c.file, c.re)
			continue
		}
		// Every occurrence must agree, but the changelog's headings name
		// every release: the first, the latest, is the one.
		if c.file == "CHANGELOG.md" {
			all = all[:1]
		}
		for _, m := range all {
			if m[1] != release {
				t.Errorf("%s says %q where VERSION says %q (%s)", c.file, m[1], release, strings.TrimSpace(m[0]))
			}
		}
	}
	out, err := exec.Command("sh", filepath.Join(root, "scripts", "version.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/version.sh: %v", err)
	}
	if v := strings.TrimSpace(string(out)); v != release && !strings.HasPrefix(v, release+"-") {
		t.Errorf("scripts/version.sh says %q, want %s or %s-...", v, release, release)
	}
}
