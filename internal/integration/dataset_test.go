package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/recordio"
)

// writeOneRecordChunks writes files RecordIO files of perFile chunks, each
// chunk holding one short record, and returns their glob.
func writeOneRecordChunks(t *testing.T, dir string, files, perFile int) string {
	t.Helper()
	for f := range files {
		file, err := os.Create(filepath.Join(dir, fmt.Sprintf("big-%03d.recordio", f)))
		if err != nil {
			t.Fatal(err)
		}
		buf := bufio.NewWriter(file)
		w := recordio.NewWriter(buf, 1, recordio.NoCompression) // a chunk per record
		for i := range perFile {
			if _, err := w.Write(fmt.Appendf(nil, "%d", f*perFile+i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := buf.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "big-*.recordio")
}

// TestManyTrainersSetALargeDataset: every trainer calls SetDataset, as the
// original's trainers do. 256 of them at once on a dataset of 200,000 chunks
// all succeed, the leader indexes the files once, and the Raft log holds
// one copy of the chunk list rather than one per caller.
func TestManyTrainersSetALargeDataset(t *testing.T) {
	needsProcesses(t)
	const trainers, files, perFile = 256, 20, 10000
	c := proccluster.Start(t, proccluster.Options{})
	glob := writeOneRecordChunks(t, t.TempDir(), files, perFile)
	found, _, err := recordio.IndexGlobs(context.Background(), []string{glob}, recordio.IndexLimits{})
	if err != nil || len(found) != files*perFile {
		t.Fatalf("indexed %d chunks, %v; want %d", len(found), err, files*perFile)
	}
	chunks := make([]fsm.Chunk, len(found))
	for i, c := range found {
		chunks[i] = fsm.Chunk{Path: c.Path, Offset: c.Offset, Records: c.Records}
	}
	// Entries of one upload under the default MaxEntryBytes (256 KiB).
	oneCopy := len(fsm.DatasetCommands(fsm.DefaultJob, fsm.RequestID{}, fsm.DatasetParams{}, nil, chunks, "upload", 256<<10))

	leader := c.Leader()
	c.WaitFor("every node registered", time.Minute, func() bool {
		st, err := proccluster.Status(context.Background(), leader.APIAddr)
		return err == nil && st.FSM.Nodes == len(c.Procs)
	})
	before, err := proccluster.Status(context.Background(), leader.APIAddr)
	if err != nil {
		t.Fatal(err)
	}

	clients := make([]*client.Client, trainers)
	for i := range clients {
		clients[i] = newClient(t, client.WithAddrs(c.APIAddrs()...))
	}
	start := make(chan struct{})
	errs := make([]error, trainers)
	ignored := make([]bool, trainers)
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() {
			<-start
			resp, err := cl.SetDatasetWithParams([]string{glob}, client.DatasetParams{})
			errs[i], ignored[i] = err, resp.Ignored
		})
	}
	close(start)
	wg.Wait()
	installed := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("trainer %d: SetDataset: %v", i, err)
		} else if !ignored[i] {
			installed++
		}
	}
	if installed != 1 {
		t.Errorf("%d calls installed the dataset, want 1 (the others are ignored)", installed)
	}

	st, err := clients[0].Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.FSM.Chunks != files*perFile || st.FSM.Tasks == 0 {
		t.Fatalf("status: %d chunks in %d tasks, want %d chunks", st.FSM.Chunks, st.FSM.Tasks, files*perFile)
	}
	// Log indexes are global: read the last one after the replicas agree,
	// from whichever node has the most.
	c.Converged(time.Minute)
	var last uint64
	for _, p := range c.Procs {
		st, err := proccluster.Status(context.Background(), p.APIAddr)
		if err != nil {
			t.Fatal(err)
		}
		last = max(last, st.LastIndex)
	}
	// A few entries besides the upload are fine (an election adds some);
	// a copy per caller would be hundreds of times more.
	const slack = 16
	grew := last - before.LastIndex
	t.Logf("log grew by %d entries; one copy of the chunk list takes %d", grew, oneCopy)
	if grew < uint64(oneCopy) || grew > uint64(oneCopy+slack) {
		t.Errorf("log grew by %d entries, want one upload of %d entries (+%d)", grew, oneCopy, slack)
	}
	indexed := 0
	for _, p := range c.Procs {
		logs, err := readFile(p.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		indexed += strings.Count(logs, "indexed dataset")
	}
	if indexed != 1 {
		t.Errorf("the dataset was indexed %d times, want once", indexed)
	}
}

// TestNamedJobLargeDatasetAfterTheDefaultJobs: a dataset too large for one
// Raft entry (DatasetPart entries, then a DatasetCommit) is installed whole
// in a named job while the default job already has a dataset: the leader
// sends every part of the named job's upload, and no other job's dataset
// makes it give up.
func TestNamedJobLargeDatasetAfterTheDefaultJobs(t *testing.T) {
	needsProcesses(t)
	const files, perFile = 5, 20000
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	at := client.WithAddrs(c.APIAddrs()...)
	if err := newClient(t, at).SetDataset([]string{writeDataset(t, t.TempDir(), 100, 50, 60)}); err != nil {
		t.Fatal(err)
	}
	glob := writeOneRecordChunks(t, t.TempDir(), files, perFile)
	found, _, err := recordio.IndexGlobs(context.Background(), []string{glob}, recordio.IndexLimits{})
	if err != nil || len(found) != files*perFile {
		t.Fatalf("indexed %d chunks, %v; want %d", len(found), err, files*perFile)
	}
	chunks := make([]fsm.Chunk, len(found))
	for i, c := range found {
		chunks[i] = fsm.Chunk{Path: c.Path, Offset: c.Offset, Records: c.Records}
	}
	// The default MaxEntryBytes (256 KiB) cuts it into parts.
	if n := len(fsm.DatasetCommands("job-big", fsm.RequestID{}, fsm.DatasetParams{}, nil, chunks, "upload", 256<<10)); n < 3 {
		t.Fatalf("the dataset takes %d entries, want a few parts and a commit", n)
	}

	resp, err := newClient(t, at, client.WithJob("job-big")).SetDatasetWithParams([]string{glob}, client.DatasetParams{})
	if err != nil {
		t.Fatalf("SetDataset of job-big: %v", err)
	}
	if resp.Ignored || resp.Chunks != files*perFile {
		t.Fatalf("SetDataset of job-big answered %+v, want %d chunks installed", resp, files*perFile)
	}
	j, err := newClient(t, at).Job("job-big")
	if err != nil {
		t.Fatal(err)
	}
	if !j.HasDataset || j.Tasks != resp.Tasks || j.Uploads != 0 {
		t.Fatalf("job-big: %+v, want the dataset of %d tasks and nothing staged", j, resp.Tasks)
	}
}
