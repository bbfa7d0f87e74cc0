// Package rawraft is the raw-Raft baseline of raftmaster-bench: a cluster of
// hashicorp/raft nodes with a no-op FSM, on the stores and transport that
// raftmaster uses (raft-boltdb/v2 with raftnode.LogStoreOptions behind raft.LogCache, the file snapshot
// store keeping two snapshots, the TCP transport with a pool of 4) and the
// Raft timeouts of raftmaster's defaults. Each node is a child process of
// the bench binary (Main); the parent (Cluster) starts them, finds the
// leader and asks it, over a small control HTTP endpoint, to run a load of
// Raft Apply calls in its own process. The measured path is therefore
// Apply on the leader down to fsync and replication to a quorum, and back
// through the no-op FSM: no HTTP, JSON, client, de-duplication or state
// machine per operation.
package rawraft

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/raftnode"
)

// The Raft settings of raftmaster's defaults (raftnode/config.go and the
// flags of raftmaster serve), which the baseline copies. raftnode exports
// its timeouts; the rest are copied from it.
const (
	HeartbeatTimeout   = raftnode.DefaultHeartbeatTimeout
	ElectionTimeout    = raftnode.DefaultElectionTimeout
	LeaderLeaseTimeout = raftnode.DefaultLeaderLeaseTimeout
	SnapshotThreshold  = 8192
	TrailingLogs       = 10240
	SnapshotInterval   = 30 * time.Second
	SnapshotsRetained  = 2
	TransportPool      = 4
	TransportTimeout   = 10 * time.Second
	// ApplyTimeout bounds how long an Apply may wait to be enqueued, as
	// raftmaster's.
	ApplyTimeout = 10 * time.Second
)

// Mode is the first argument that makes the bench binary a raw Raft node.
const Mode = "raw-raft-node"

// Status is a node's answer on the control endpoint's /status.
type Status struct {
	ID           string `json:"id"`
	State        string `json:"state"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
	LastIndex    uint64 `json:"last_index"`
}

// LoadRequest asks the leader to run Concurrency closed loops of Apply
// with entries of EntryBytes bytes for Warmup plus Window, measuring the
// Window.
type LoadRequest struct {
	Concurrency int           `json:"concurrency"`
	EntryBytes  int           `json:"entry_bytes"`
	Warmup      time.Duration `json:"warmup"`
	Window      time.Duration `json:"window"`
}

// Main runs one node until SIGTERM or SIGINT. args are its flags; log
// output goes to stderr. It returns the exit code.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(Mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "node id")
	dir := fs.String("dir", "", "data directory")
	addr := fs.String("raft-addr", "", "Raft TCP address")
	control := fs.String("control-addr", "", "control HTTP address")
	peers := fs.String("peers", "", "id=addr,... of every node")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: *id, Level: hclog.Info, Output: stderr})
	n, err := start(*id, *dir, *addr, *peers, logger)
	if err != nil {
		logger.Error("start", "error", err)
		return 1
	}
	ln, err := net.Listen("tcp", *control)
	if err != nil {
		logger.Error("control listener", "error", err)
		n.shutdown()
		return 1
	}
	srv := &http.Server{Handler: n.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	_ = srv.Close()
	n.shutdown()
	return 0
}

type node struct {
	id    string
	raft  *raft.Raft
	store *raftboltdb.BoltStore
	trans *raft.NetworkTransport
	log   hclog.Logger
}

func start(id, dir, addr, peerList string, logger hclog.Logger) (*node, error) {
	if id == "" || dir == "" || addr == "" {
		return nil, errors.New("need --id, --dir and --raft-addr")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, "raft.db"),
		BoltOptions: raftnode.LogStoreOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("log store: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, SnapshotsRetained, logger.Named("snapshot"))
	if err != nil {
		store.Close()
		return nil, err
	}
	trans, err := raft.NewTCPTransportWithConfig(addr, nil, &raft.NetworkTransportConfig{
		MaxPool: TransportPool, Timeout: TransportTimeout, Logger: logger.Named("transport")})
	if err != nil {
		store.Close()
		return nil, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(id)
	rc.HeartbeatTimeout = HeartbeatTimeout
	rc.ElectionTimeout = ElectionTimeout
	rc.LeaderLeaseTimeout = LeaderLeaseTimeout
	rc.SnapshotThreshold = SnapshotThreshold
	rc.TrailingLogs = TrailingLogs
	rc.SnapshotInterval = SnapshotInterval
	rc.Logger = logger.Named("raft")
	hasState, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		trans.Close()
		store.Close()
		return nil, err
	}
	logs, err := raft.NewLogCache(raftnode.LogCacheEntries, store)
	if err != nil {
		trans.Close()
		store.Close()
		return nil, err
	}
	r, err := raft.NewRaft(rc, noopFSM{}, logs, store, snaps, trans)
	if err != nil {
		trans.Close()
		store.Close()
		return nil, err
	}
	n := &node{id: id, raft: r, store: store, trans: trans, log: logger}
	if !hasState {
		var cfg raft.Configuration
		for _, p := range strings.Split(peerList, ",") {
			pid, paddr, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok {
				n.shutdown()
				return nil, fmt.Errorf("peer %q: want id=addr", p)
			}
			cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(pid), Address: raft.ServerAddress(paddr), Suffrage: raft.Voter})
		}
		if err := r.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.shutdown()
			return nil, err
		}
	}
	return n, nil
}

func (n *node) shutdown() {
	_ = n.raft.Shutdown().Error()
	n.trans.Close()
	n.store.Close()
}

func (n *node) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		_, leader := n.raft.LeaderWithID()
		writeJSON(w, http.StatusOK, Status{ID: n.id, State: n.raft.State().String(), Leader: string(leader),
			AppliedIndex: n.raft.AppliedIndex(), LastIndex: n.raft.LastIndex()})
	})
	mux.HandleFunc("POST /load", func(w http.ResponseWriter, r *http.Request) {
		var req LoadRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Concurrency < 1 || req.EntryBytes < 8 || req.Window <= 0 {
			http.Error(w, "bad load request", http.StatusBadRequest)
			return
		}
		if n.raft.State() != raft.Leader {
			http.Error(w, "not the leader", http.StatusConflict)
			return
		}
		run, err := n.load(r.Context(), req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, http.StatusOK, run)
	})
	return mux
}

// load runs the closed loops of Apply. Every entry is a fresh buffer of
// random bytes with a counter, as a proposer encoding a command would
// allocate one.
func (n *node) load(ctx context.Context, req LoadRequest) (measure.Run, error) {
	template := make([]byte, req.EntryBytes)
	_, _ = rand.Read(template)
	return measure.Drive(ctx, req.Concurrency, req.Warmup, req.Window, func(ctx context.Context, w *measure.Worker) error {
		buf := make([]byte, len(template))
		copy(buf, template)
		binary.LittleEndian.PutUint64(buf, uint64(time.Now().UnixNano()))
		t0 := time.Now()
		err := n.raft.Apply(buf, ApplyTimeout).Error()
		t1 := time.Now()
		if err != nil {
			w.Failed(t1)
			return fmt.Errorf("apply: %w", err)
		}
		w.Record(t0, t1)
		return nil
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// noopFSM applies nothing and snapshots nothing.
type noopFSM struct{}

// Apply does nothing with a committed entry.
func (noopFSM) Apply(*raft.Log) any { return nil }

// Snapshot returns an empty snapshot.
func (noopFSM) Snapshot() (raft.FSMSnapshot, error) { return noopSnapshot{}, nil }

// Restore reads and discards a snapshot.
func (noopFSM) Restore(rc io.ReadCloser) error {
	_, err := io.Copy(io.Discard, rc)
	rc.Close()
	return err
}

type noopSnapshot struct{}

// Persist writes nothing.
func (noopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }

// Release has nothing to release.
func (noopSnapshot) Release() {}
