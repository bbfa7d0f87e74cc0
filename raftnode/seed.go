package raftnode

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// Seed makes dataDir the data directory of the first node of a new cluster
// whose state is snapshot (a state machine snapshot taken at index, as a
// backup holds): a Raft snapshot at index with a configuration of this
// node alone. The state is the snapshot's in the next era (fsm.NextEra),
// so that the new cluster hands out no register version, generation, task
// epoch or job number that the cluster the backup came from handed out.
// Started with its usual flags (no --peers needed), the node restores the
// state and elects itself; further nodes join it. Seed refuses a
// directory that already holds Raft state, and writes nothing then.
func Seed(dataDir, nodeID, raftAddr string, index uint64, snapshot []byte, logger hclog.Logger) (err error) {
	if nodeID == "" || raftAddr == "" {
		return fmt.Errorf("raftnode: seed: need the node's id and Raft address")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if _, err := os.Stat(filepath.Join(dataDir, logStoreFile)); err == nil {
		return fmt.Errorf("raftnode: seed: %s already holds a Raft log; restore into an empty directory", dataDir)
	}
	if entries, err := os.ReadDir(filepath.Join(dataDir, "snapshots")); err == nil && len(entries) > 0 {
		return fmt.Errorf("raftnode: seed: %s already holds snapshots; restore into an empty directory", dataDir)
	}
	if _, statErr := os.Stat(dataDir); os.IsNotExist(statErr) {
		// A directory made here goes again if the seed fails.
		defer func() {
			if err != nil {
				os.RemoveAll(dataDir)
			}
		}()
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("raftnode: seed: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, logger.Named("snapshot"))
	if err != nil {
		return fmt.Errorf("raftnode: seed: snapshot store: %w", err)
	}
	const term = 1
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(nodeID), Address: raft.ServerAddress(raftAddr)}}}
	// The transport only encodes the configuration's addresses.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr))
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, conf, index, trans)
	if err != nil {
		return fmt.Errorf("raftnode: seed: %w", err)
	}
	if err := fsm.NextEra(sink, bytes.NewReader(snapshot)); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftnode: seed: writing the snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("raftnode: seed: %w", err)
	}
	// The node's term starts at the snapshot's, as if it had been
	// elected in it.
	store, err := openLogStore(dataDir)
	if err != nil {
		return fmt.Errorf("raftnode: seed: log store: %w", err)
	}
	defer store.Close()
	if err := store.SetUint64([]byte("CurrentTerm"), term); err != nil {
		return fmt.Errorf("raftnode: seed: %w", err)
	}
	return nil
}
