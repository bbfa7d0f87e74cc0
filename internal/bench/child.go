package bench

import (
	"io"
	"os"
	"time"

	"github.com/raftmaster/raftmaster/internal/bench/etcdmember"
	"github.com/raftmaster/raftmaster/internal/bench/rawraft"
)

// IsChild reports whether args (os.Args) start one of the bench binary's
// hidden child modes: an etcd member, a raw Raft node, or a trainer that
// holds a task until it is killed.
func IsChild(args []string) bool {
	return len(args) > 1 && (args[1] == etcdmember.Mode || args[1] == rawraft.Mode || args[1] == trainerMode)
}

// RunChild runs the child mode that args (os.Args) name and returns its
// exit code. A child exits when the bench that started it is gone, so an
// interrupted bench leaves no etcd member, Raft node or trainer behind.
func RunChild(args []string, stderr io.Writer) int {
	go exitWithParent()
	switch args[1] {
	case etcdmember.Mode:
		return etcdmember.Main(args[2:], stderr)
	case rawraft.Mode:
		return rawraft.Main(args[2:], stderr)
	case trainerMode:
		return trainerMain(args[2:], os.Stdout, stderr)
	}
	return 2
}

// exitWithParent exits the process once its parent has gone (it is then
// re-parented, and its parent id changes).
func exitWithParent() {
	parent := os.Getppid()
	for {
		time.Sleep(500 * time.Millisecond)
		if os.Getppid() != parent {
			os.Exit(3)
		}
	}
}
