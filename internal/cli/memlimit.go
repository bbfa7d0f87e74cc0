package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/dustin/go-humanize"
	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
)

// minMemoryLimit is the least --memory-limit serve takes: below it a node
// would spend its time collecting garbage.
const minMemoryLimit = 64 << 20

// memoryLimitRatio is the share of a container's memory limit that
// --memory-limit auto gives the Go heap, leaving the rest for what the
// runtime does not count (the bbolt map, stacks, fragmentation).
const memoryLimitRatio = 0.9

func memoryLimitFlag() cli.Flag {
	return &cli.StringFlag{Name: "memory-limit", Value: "auto", EnvVars: env("memory-limit"),
		Usage: fmt.Sprintf("soft limit of this node's Go memory, past which the garbage collector works harder to stay under it (GOMEMLIMIT): "+
			"a size (512MiB, 2GB), off (GOMEMLIMIT's alone, if set), or auto: %.0f%% of the container's cgroup memory limit when it has one and GOMEMLIMIT is not set. "+
			"Without it the heap may grow to twice the state before a collection", memoryLimitRatio*100)}
}

// applyMemoryLimit sets the Go runtime's soft memory limit as
// --memory-limit says, and returns it (math.MaxInt64 for none).
func applyMemoryLimit(value string, log hclog.Logger) (int64, error) {
	switch v := strings.TrimSpace(strings.ToLower(value)); v {
	case "off", "0", "none":
		return debug.SetMemoryLimit(-1), nil
	case "auto", "":
		limit, err := memlimit.Set(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(memlimit.FromCgroup),
			memlimit.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		switch {
		case errors.Is(err, memlimit.ErrNoCgroup), errors.Is(err, memlimit.ErrCgroupsNotSupported):
			log.Debug("no container memory limit to derive --memory-limit from", "error", err)
		case err != nil:
			log.Warn("cannot read the container's memory limit; running without --memory-limit", "error", err)
		case limit != math.MaxInt64:
			log.Info("memory limit", "bytes", limit, "limit", humanize.IBytes(uint64(limit)), "from", "GOMEMLIMIT or the cgroup")
		}
		return debug.SetMemoryLimit(-1), nil
	}
	n, err := humanize.ParseBytes(value)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit %q: want a size such as 512MiB or 2GB, auto or off", value)
	}
	if n < minMemoryLimit || n > math.MaxInt64 {
		return 0, fmt.Errorf("--memory-limit %q: a node needs at least %s", value, humanize.IBytes(minMemoryLimit))
	}
	debug.SetMemoryLimit(int64(n))
	log.Info("memory limit", "bytes", n, "limit", humanize.IBytes(n))
	return int64(n), nil
}
