package raftnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// Recovered says what Recover kept: the node's server id, the new
// configuration, and the last entry of the node's log, after which every
// entry that only the lost nodes held is gone.
type Recovered struct {
	ServerID  string
	Peers     []Peer
	LastIndex uint64
	LastTerm  uint64
}

// Recover rewrites the Raft configuration of the stopped node whose data
// is in dataDir to peers (raft.RecoverCluster), for a cluster that lost
// its majority for good: the survivors, each recovered with the same
// peers, can then start again and elect a leader among themselves. A peer
// may be named by its server id or by its node name, which is looked up in
// the node's latest configuration. Every entry the node holds is kept: the
// log is applied to a fresh state machine and written as a snapshot with
// the new configuration. Entries the node never received are lost, so
// recover the most up-to-date survivors. It fails, changing nothing, when
// the node is running (its log store is locked), dataDir holds no Raft
// state, or the peers do not include the node.
func Recover(dataDir string, peers []Peer, logger hclog.Logger) (Recovered, error) {
	if len(peers) == 0 {
		return Recovered{}, errors.New("raftnode: recover: no peers given")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	path := filepath.Join(dataDir, logStoreFile)
	if _, err := os.Stat(path); err != nil {
		return Recovered{}, fmt.Errorf("raftnode: recover: no Raft log in %s: %w", dataDir, err)
	}
	store, err := openLogStore(dataDir)
	if err != nil {
		return Recovered{}, fmt.Errorf("raftnode: recover: open %s (stop the node first): %w", path, err)
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, logger.Named("snapshot"))
	if err != nil {
		return Recovered{}, fmt.Errorf("raftnode: recover: snapshot store: %w", err)
	}
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return Recovered{}, fmt.Errorf("raftnode: recover: %w", err)
	}
	if !has {
		return Recovered{}, fmt.Errorf("raftnode: recover: %s holds no Raft state", dataDir)
	}
	rc := raft.DefaultConfig()
	rc.Logger = logger.Named("raft")
	_, trans := raft.NewInmemTransport("")
	// The node's own id is its identity's, or, in a directory of an
	// earlier release, the first peer's.
	rc.LocalID = "recover"
	latest, err := raft.GetConfiguration(rc, raftFSM{f: fsm.New()}, store, stableStore(store), snaps, trans)
	if err != nil {
		return Recovered{}, fmt.Errorf("raftnode: recover: read the latest configuration: %w", err)
	}
	self := ""
	if b, err := store.Get(identityKey); err == nil && len(b) > 0 {
		var id identity
		if err := json.Unmarshal(b, &id); err != nil {
			return Recovered{}, fmt.Errorf("raftnode: recover: the data directory's identity: %w", err)
		}
		self = id.ServerID
	}
	out := Recovered{}
	conf := raft.Configuration{}
	for _, p := range peers {
		id := p.ID
		if !strings.Contains(id, IncarnationSep) {
			for _, s := range latest.Servers {
				if NameOf(string(s.ID)) == p.ID {
					id = string(s.ID)
				}
			}
		}
		out.Peers = append(out.Peers, Peer{ID: id, RaftAddr: p.RaftAddr})
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(p.RaftAddr)})
	}
	if self == "" {
		// A data directory of an earlier release names no server: as
		// then, the first peer is this node.
		self = out.Peers[0].ID
	}
	if !hasServer(conf, self) {
		return Recovered{}, fmt.Errorf("raftnode: recover: --peers must include this node (server id %q); its latest configuration was %s",
			self, describeConfig(latest))
	}
	rc.LocalID = raft.ServerID(self)
	out.ServerID = self
	if err := raft.RecoverCluster(rc, raftFSM{f: fsm.New()}, store, stableStore(store), snaps, trans, conf); err != nil {
		return Recovered{}, fmt.Errorf("raftnode: recover: %w", err)
	}
	if snaps, err := snaps.List(); err == nil && len(snaps) > 0 {
		out.LastIndex, out.LastTerm = snaps[0].Index, snaps[0].Term
	}
	return out, nil
}

// hasServer reports whether c lists the server id.
func hasServer(c raft.Configuration, id string) bool {
	for _, s := range c.Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// describeConfig lists a configuration's servers as id=address.
func describeConfig(c raft.Configuration) string {
	var b strings.Builder
	for i, s := range c.Servers {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%s=%s", s.ID, s.Address)
	}
	return b.String()
}
