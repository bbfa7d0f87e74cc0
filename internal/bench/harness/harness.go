// Package harness drives task dispatch on raftmaster serve processes: it
// starts and stops clusters of either backend, writes the RecordIO datasets
// they serve, and runs trainers that lease tasks and report them finished,
// timed with package measure. Both benchmarks use it: the side-by-side
// suite (package bench, raftmaster-bench), which measures throughput in
// timed windows, and raftmaster bench (Compare), which runs a fixed number
// of passes on each backend. It links no etcd server and no raw Raft, so
// the raftmaster binary can carry it.
package harness

import (
	"bufio"
	"fmt"
	"os"

	"github.com/raftmaster/raftmaster/recordio"
)

// WriteDataset writes n one-record chunks to path, so that a dataset of
// one chunk per task has n tasks.
func WriteDataset(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := recordio.NewWriter(bw, 1, recordio.NoCompression) // every record closes its chunk
	for i := range n {
		if _, err := w.Write([]byte(fmt.Sprintf("record-%d", i))); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}
