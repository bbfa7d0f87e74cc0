package raftnode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// RestoreDataDir makes dataDir the data directory of the first node of a
// new cluster whose state is a state machine snapshot taken at index, as a
// backup holds (raftmaster restore): a Raft snapshot at index with a
// configuration of this node alone. writeState writes the snapshot's
// encoding as it is read, so the state need not fit in memory; if it
// fails, because the state it read turned out damaged, the snapshot is
// discarded. The state is restored in the next era (fsm.NextEra), so that
// the new cluster hands out no register version, generation, task epoch or
// job number that the cluster the backup came from handed out. Started
// with its usual flags (no --peers needed), the node restores the state
// and elects itself; further nodes are added as members. RestoreDataDir
// refuses a directory that already holds Raft state; when it fails, it
// leaves no Raft state behind (and no directory it made).
func RestoreDataDir(dataDir, nodeID, raftAddr string, index uint64, writeState func(io.Writer) error, logger hclog.Logger) (err error) {
	if nodeID == "" || raftAddr == "" {
		return fmt.Errorf("raftnode: restore: need the node's id and Raft address")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if _, err := os.Stat(filepath.Join(dataDir, logStoreFile)); err == nil {
		return fmt.Errorf("raftnode: restore: %s already holds a Raft log; restore into an empty directory", dataDir)
	}
	if entries, err := os.ReadDir(filepath.Join(dataDir, "snapshots")); err == nil && len(entries) > 0 {
		return fmt.Errorf("raftnode: restore: %s already holds snapshots; restore into an empty directory", dataDir)
	}
	if _, statErr := os.Stat(dataDir); os.IsNotExist(statErr) {
		// A directory made here goes again if the restore fails.
		defer func() {
			if err != nil {
				os.RemoveAll(dataDir)
			}
		}()
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("raftnode: restore: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, logger.Named("snapshot"))
	if err != nil {
		return fmt.Errorf("raftnode: restore: snapshot store: %w", err)
	}
	const term = 1
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(nodeID), Address: raft.ServerAddress(raftAddr)}}}
	// The transport only encodes the configuration's addresses.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr))
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, conf, index, trans)
	if err != nil {
		return fmt.Errorf("raftnode: restore: %w", err)
	}
	// The state passes through NextEra as writeState produces it; an
	// error of either ends both.
	pr, pw := io.Pipe()
	written := make(chan struct{})
	go func() {
		defer close(written)
		pw.CloseWithError(writeState(pw))
	}()
	err = fsm.NextEra(sink, pr)
	pr.CloseWithError(errors.New("raftnode: restore: the snapshot was not read to its end"))
	<-written
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftnode: restore: writing the snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("raftnode: restore: %w", err)
	}
	// The node's term starts at the snapshot's, as if it had been
	// elected in it.
	store, err := openLogStore(dataDir)
	if err != nil {
		return fmt.Errorf("raftnode: restore: log store: %w", err)
	}
	defer store.Close()
	if err := store.SetUint64([]byte("CurrentTerm"), term); err != nil {
		return fmt.Errorf("raftnode: restore: %w", err)
	}
	return nil
}
