// Package server runs one raftmaster replica: the Raft node, the HTTP API in
// front of it, and the loop that registers the node with the cluster.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
)

// Config configures a replica.
type Config struct {
	// Node configures Raft. Node.APIAddr defaults to the HTTP listener's
	// address.
	Node raftnode.Config
	// HTTPAddr is the address the API listens on.
	HTTPAddr string
	// Join lists API addresses of a running cluster to join through;
	// empty when the node bootstraps from Node.Peers or restarts.
	Join []string
	// RPC configures the HTTP handlers.
	RPC rpc.ServerConfig
	// Logger receives all logs.
	Logger hclog.Logger
}

// Server is a running replica.
type Server struct {
	cfg    Config
	log    hclog.Logger
	node   *raftnode.Node
	ln     net.Listener
	http   *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start listens, starts Raft and serves the API. It returns once the
// listeners are up; joining and registration go on in the background.
func Start(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("http listener: %w", err)
	}
	if cfg.Node.APIAddr == "" {
		cfg.Node.APIAddr = ln.Addr().String()
	}
	cfg.Node.Logger = cfg.Logger
	node, err := raftnode.New(cfg.Node)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, node: node, ln: ln}
	s.http = &http.Server{
		Handler:           rpc.NewServer(backend{node}, cfg.RPC, cfg.Logger.Named("http")),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          cfg.Logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "error", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.register(ctx)
	}()
	s.log.Info("raftmaster node started", "id", cfg.Node.ID, "raft", node.RaftAddr(), "api", cfg.Node.APIAddr)
	return s, nil
}

// Node returns the Raft node.
func (s *Server) Node() *raftnode.Node { return s.node }

// APIAddr returns the advertised API address.
func (s *Server) APIAddr() string { return s.cfg.Node.APIAddr }

// Shutdown transfers leadership if this node leads, stops Raft, then the
// HTTP server.
func (s *Server) Shutdown(ctx context.Context) error {
	s.cancel()
	err := s.node.Shutdown(ctx)
	if herr := s.http.Shutdown(ctx); herr != nil && err == nil {
		err = herr
	}
	s.wg.Wait()
	return err
}

// register makes sure the cluster knows this node: with Join addresses it
// asks the cluster to add it as a voter; otherwise, as a follower of a
// bootstrapped cluster, it asks the leader to record its API address in
// the node registry. The leader registers itself. It retries until the
// registry holds this node's entry.
func (s *Server) register(ctx context.Context) {
	self := rpc.JoinClusterRequest{ID: s.node.ID(), RaftAddr: s.node.RaftAddr(), APIAddr: s.cfg.Node.APIAddr}
	client := &http.Client{Timeout: 10 * time.Second}
	backoff := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if cur, ok := s.node.FSM().Node(self.ID); ok && cur.RaftAddr == self.RaftAddr && cur.APIAddr == self.APIAddr {
			s.log.Info("node registered", "id", self.ID)
			return
		}
		var targets []string
		if s.node.IsLeader() {
			targets = nil // the leader loop registers the leader
		} else if leader, ok := s.node.Leader(); ok && leader.APIAddr != "" {
			targets = []string{leader.APIAddr}
		} else if len(s.cfg.Join) > 0 {
			targets = s.cfg.Join
		}
		for _, addr := range targets {
			err := postJoin(ctx, client, addr, self)
			if err == nil {
				break
			}
			if attempt%10 == 0 {
				s.log.Warn("joining the cluster", "via", addr, "error", err)
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// postJoin sends a join request to addr; the HTTP client follows the
// leader redirect.
func postJoin(ctx context.Context, client *http.Client, addr string, req rpc.JoinClusterRequest) error {
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+rpc.PathClusterJoin, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
