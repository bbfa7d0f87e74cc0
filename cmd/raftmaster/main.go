// Command raftmaster is the single binary of the raftmaster master cluster:
// it serves a replica, administers the cluster and prepares RecordIO data.
// Run "raftmaster --help" for the command list.
package main

import (
	"os"

	"github.com/raftmaster/raftmaster/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args))
}
