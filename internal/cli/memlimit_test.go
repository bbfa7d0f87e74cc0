package cli

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestMemoryLimit: --memory-limit sets the runtime's soft limit from a
// size, clears it with off, and refuses what is no size or too small,
// leaving the limit as it was.
func TestMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	log := hclog.NewNullLogger()
	got, err := applyMemoryLimit("512MiB", log)
	if err != nil || got != 512<<20 || debug.SetMemoryLimit(-1) != 512<<20 {
		t.Fatalf("512MiB: %d, %v; runtime limit %d", got, err, debug.SetMemoryLimit(-1))
	}
	for _, bad := range []string{"lots", "1MiB", "-5GB"} {
		if _, err := applyMemoryLimit(bad, log); err == nil || !strings.Contains(err.Error(), "--memory-limit") {
			t.Errorf("%q: error %v, want one naming --memory-limit", bad, err)
		}
		if l := debug.SetMemoryLimit(-1); l != 512<<20 {
			t.Errorf("%q changed the limit to %d", bad, l)
		}
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if got, err := applyMemoryLimit("2GB", log); err != nil || got != 2e9 {
		t.Fatalf("2GB: %d, %v", got, err)
	}
	if got, err := applyMemoryLimit("off", log); err != nil || got != 2e9 {
		t.Fatalf("off: %d, %v: want the limit left as GOMEMLIMIT or an earlier setting made it", got, err)
	}
}
