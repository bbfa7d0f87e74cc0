package raftnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// Recover rewrites the Raft configuration of the stopped node whose data
// is in dataDir to peers (raft.RecoverCluster), for a cluster that lost
// its majority for good: the survivors, each recovered with the same
// peers, can then start again and elect a leader among themselves. Every
// entry the node holds is kept: the log is applied to a fresh state
// machine and written as a snapshot with the new configuration. Entries
// the node never received are lost, so recover the most up-to-date
// survivors. It fails, changing nothing, when the node is running (its
// log store is locked) or dataDir holds no Raft state.
func Recover(dataDir string, peers []Peer, logger hclog.Logger) error {
	if len(peers) == 0 {
		return errors.New("raftnode: recover: no peers given")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	path := filepath.Join(dataDir, logStoreFile)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("raftnode: recover: no Raft log in %s: %w", dataDir, err)
	}
	store, err := openLogStore(dataDir)
	if err != nil {
		return fmt.Errorf("raftnode: recover: open %s (stop the node first): %w", path, err)
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, logger.Named("snapshot"))
	if err != nil {
		return fmt.Errorf("raftnode: recover: snapshot store: %w", err)
	}
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return fmt.Errorf("raftnode: recover: %w", err)
	}
	if !has {
		return fmt.Errorf("raftnode: recover: %s holds no Raft state", dataDir)
	}
	conf := raft.Configuration{}
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(peers[0].ID)
	rc.Logger = logger.Named("raft")
	_, trans := raft.NewInmemTransport("")
	if err := raft.RecoverCluster(rc, raftFSM{fsm.New()}, store, stableStore(store), snaps, trans, conf); err != nil {
		return fmt.Errorf("raftnode: recover: %w", err)
	}
	return nil
}
