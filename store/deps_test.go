package store_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestStoreLinksNoMasterCode: the store sits under the masters of the etcd
// backend; it may link, of this module, only its own packages, so that
// what a master does while it leads never becomes a dependency of where
// it keeps its state.
func TestStoreLinksNoMasterCode(t *testing.T) {
	const module = "github.com/raftmaster/raftmaster/"
	// go test puts its own GOROOT/bin first in PATH.
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	out, err := exec.Command(goCmd, "list", "-deps", "-f", "{{.ImportPath}}", module+"store").Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != module+"store" {
		t.Fatalf("go list did not list the store package last: %q", out)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, module) && d != module+"store" && !strings.HasPrefix(d, module+"store/") {
			t.Errorf("store depends on %s: only its own packages may be linked", d)
		}
	}
}
