package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/internal/etcdmaster"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/raftmaster/raftmaster/store"
	"github.com/urfave/cli/v2"
)

// runServeEtcd runs one master of the etcd backend until a signal, or until
// its etcd session is lost, which is an error so that a supervisor restarts
// the process.
func runServeEtcd(c *cli.Context) error {
	logger, err := serveLogger(c)
	if err != nil {
		return err
	}
	endpoints := splitList(c.String("etcd-endpoints"))
	if len(endpoints) == 0 {
		return fmt.Errorf("--backend etcd needs --etcd-endpoints")
	}
	for _, f := range []string{"peers", "join", "test-raft-dial"} {
		if c.String(f) != "" {
			return fmt.Errorf("--%s is for the raft backend; the etcd backend elects its master through etcd", f)
		}
	}
	ttl := c.Duration("etcd-ttl")
	if ttl < time.Second || ttl%time.Second != 0 {
		return fmt.Errorf("--etcd-ttl %v: want whole seconds, at least 1s", ttl)
	}
	prefix := strings.TrimSuffix(c.String("etcd-prefix"), "/")
	if !strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("--etcd-prefix %q: want an absolute key such as /master", c.String("etcd-prefix"))
	}
	maxState := c.Int("etcd-max-state-bytes")
	if maxState < 2*etcdmaster.StateHeadroom {
		return fmt.Errorf("--etcd-max-state-bytes %d: want at least %d", maxState, 2*etcdmaster.StateHeadroom)
	}
	params, err := datasetDefaults(c)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.String("http-addr"))
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	apiAddr := c.String("advertise-addr")
	if apiAddr == "" {
		apiAddr = ln.Addr().String()
	}
	m, err := etcdmaster.Start(etcdmaster.Config{
		ID: c.String("node-id"), APIAddr: apiAddr,
		Store: store.EtcdConfig{
			Endpoints: endpoints, TTL: ttl, MaxStateBytes: maxState,
			LockPath: prefix + "/lock", AddrPath: prefix + "/addr", StatePath: prefix + "/state",
		},
		MembersPath:   prefix + "/members/",
		FailoverGrace: c.Duration("failover-grace"), Clock: testClock(c, logger), Logger: logger,
	})
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           rpc.NewServer(m, rpc.ServerConfig{DatasetDefaults: params}, logger.Named("http")),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("raftmaster etcd-backend master started", "id", c.String("node-id"), "api", apiAddr, "etcd", strings.Join(endpoints, ","))
	sig := waitForSignal(m.Lost())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// Give the lock up first, so that a standby takes over while this
	// process finishes its requests; from then on it answers no_leader and
	// clients retry elsewhere.
	merr := m.Shutdown(ctx)
	herr := srv.Shutdown(ctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) && herr == nil {
		herr = err
	}
	if sig == "" {
		return errors.New("lost the etcd session: this master can no longer prove it holds the lock; exiting")
	}
	logger.Info("shut down", "signal", sig)
	return errors.Join(herr, merr)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
