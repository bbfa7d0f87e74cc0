// Package version says which build of raftmaster is running.
package version

import (
	"runtime/debug"
	"strings"
)

// stamp is set at link time by make build:
//
//	-ldflags "-X github.com/raftmaster/raftmaster/internal/version.stamp=$(git describe --tags --always --dirty)"
var stamp string

// String returns the build's version: the stamp make build writes (git
// describe), or else what the Go toolchain recorded, the module version of
// a `go install`ed binary or the VCS revision of a build in a checkout, or
// "unknown".
func String() string {
	if stamp != "" {
		return stamp
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown"
	}
	v := "rev-" + rev[:min(12, len(rev))]
	if modified == "true" {
		v += "-dirty"
	}
	return strings.TrimSpace(v)
}
