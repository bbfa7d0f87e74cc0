package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestDeployFilesSetRealFlags: every RAFTMASTER_ variable that deploy/
// sets (the compose files, the Helm chart, the image, the systemd files)
// is the variable of a flag of raftmaster, so that none is a misspelling
// the binary would silently ignore.
func TestDeployFilesSetRealFlags(t *testing.T) {
	known := map[string]bool{}
	collect := func(flags []cli.Flag) {
		for _, f := range flags {
			if e, ok := f.(interface{ GetEnvVars() []string }); ok {
				for _, name := range e.GetEnvVars() {
					known[name] = true
				}
			}
		}
	}
	app := NewApp(nil, nil)
	collect(app.Flags)
	var walk func(cmds []*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			collect(c.Flags)
			walk(c.Subcommands)
		}
	}
	walk(app.Commands)

	variable := regexp.MustCompile(`RAFTMASTER_[A-Z_]+[A-Z]`)
	root := filepath.Join("..", "..", "deploy")
	seen := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".json") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range variable.FindAllString(string(b), -1) {
			seen++
			// RAFTMASTER_DATASETS and RAFTMASTER_IMAGE are compose's own:
			// the host directory of the datasets, and the image to run.
			if !known[name] && name != "RAFTMASTER_DATASETS" && name != "RAFTMASTER_IMAGE" {
				t.Errorf("%s sets %s, the variable of no raftmaster flag", path, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"RAFTMASTER_JOIN", "RAFTMASTER_BOOTSTRAP_EXPECT", "RAFTMASTER_ADDR", "RAFTMASTER_DATASET_ROOT", "RAFTMASTER_TLS_CERT", "RAFTMASTER_TLS_KEY", "RAFTMASTER_TLS_CA"} {
		if !known[must] {
			t.Errorf("%s is not a flag's variable", must)
		}
	}
	if seen < 50 {
		t.Fatalf("found only %d variables under %s", seen, root)
	}
}
