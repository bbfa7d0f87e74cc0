package fsm

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// allowedDeps are the only packages outside the standard library that this
// package may depend on, directly or not. It is the state machine alone:
// raftnode adapts it to hashicorp/raft, and the etcd backend runs it
// without Raft.
var allowedDeps = []string{"github.com/google/uuid"}

// depsFormat makes go list print, per package, its import path, whether it
// is in the standard library and whether it is only a dependency (false
// for the package listed itself).
const depsFormat = "{{.ImportPath}} {{.Standard}} {{.DepOnly}}"

// TestDependencies fails if the package, built with or without the build
// tags its files use, depends on a package outside the standard library
// other than allowedDeps.
func TestDependencies(t *testing.T) {
	// go test puts its own GOROOT/bin first in PATH.
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	for _, tags := range []string{"", "chaos_broken_fsm", "chaos_broken_sessions"} {
		out, err := exec.Command(goCmd, "list", "-deps", "-tags="+tags, "-f", depsFormat, ".").Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Fatalf("go list -tags=%q: %v\n%s", tags, err, stderr)
		}
		bad, err := foreignDeps(string(out))
		if err != nil {
			t.Fatalf("go list -tags=%q: %v\n%s", tags, err, out)
		}
		if len(bad) > 0 {
			t.Errorf("tags %q: the fsm package depends on %s; only the standard library and %s are allowed",
				tags, strings.Join(bad, ", "), strings.Join(allowedDeps, ", "))
		}
	}

	t.Run("reports a foreign package", func(t *testing.T) {
		listing := strings.Join([]string{
			"fmt true true",
			"github.com/google/uuid false true",
			"github.com/hashicorp/go-hclog false true",
			"github.com/hashicorp/raft false true",
			"github.com/raftmaster/raftmaster/fsm false false",
		}, "\n")
		got, err := foreignDeps(listing)
		if want := []string{"github.com/hashicorp/go-hclog", "github.com/hashicorp/raft"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("foreignDeps = %v, %v; want %v", got, err, want)
		}
		if _, err := foreignDeps("fmt true true\n"); err == nil {
			t.Fatalf("a listing without the package itself was accepted")
		}
	})
}

// foreignDeps returns the dependencies in a depsFormat listing that are
// neither in the standard library nor allowed. It fails on a listing that
// does not name exactly one package itself, so that an empty or garbled
// output cannot pass.
func foreignDeps(listing string) ([]string, error) {
	var bad, roots []string
	for line := range strings.Lines(listing) {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("unexpected go list line %q", line)
		}
		path, std, depOnly := f[0], f[1] == "true", f[2] == "true"
		switch {
		case !depOnly:
			roots = append(roots, path)
		case !std && !slices.Contains(allowedDeps, path):
			bad = append(bad, path)
		}
	}
	if len(roots) != 1 {
		return nil, fmt.Errorf("go list named %d packages, want this one: %v", len(roots), roots)
	}
	return bad, nil
}
