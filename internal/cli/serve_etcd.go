package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/internal/etcdmaster"
	"github.com/raftmaster/raftmaster/internal/replica"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/raftmaster/raftmaster/store"
	"github.com/urfave/cli/v2"
)

// etcdConfig reads the flags of the etcd backend.
func etcdConfig(c *cli.Context, logger hclog.Logger) (replica.Etcd, error) {
	endpoints := splitList(c.String("etcd-endpoints"))
	if len(endpoints) == 0 {
		return replica.Etcd{}, fmt.Errorf("--backend etcd needs --etcd-endpoints")
	}
	for _, f := range []string{"peers", "join", "test-raft-dial", "bootstrap-expect"} {
		if c.IsSet(f) {
			return replica.Etcd{}, fmt.Errorf("--%s is for the raft backend; the etcd backend elects its master through etcd", f)
		}
	}
	ttl := c.Duration("etcd-ttl")
	if ttl < time.Second || ttl%time.Second != 0 {
		return replica.Etcd{}, fmt.Errorf("--etcd-ttl %v: want whole seconds, at least 1s", ttl)
	}
	prefix := strings.TrimSuffix(c.String("etcd-prefix"), "/")
	if !strings.HasPrefix(prefix, "/") {
		return replica.Etcd{}, fmt.Errorf("--etcd-prefix %q: want an absolute key such as /master", c.String("etcd-prefix"))
	}
	maxState := c.Int("etcd-max-state-bytes")
	if maxState < 2*etcdmaster.StateHeadroom {
		return replica.Etcd{}, fmt.Errorf("--etcd-max-state-bytes %d: want at least %d", maxState, 2*etcdmaster.StateHeadroom)
	}
	limits, err := jobLimits(c)
	if err != nil {
		return replica.Etcd{}, err
	}
	apiAdvertise, err := advertised(c.String("advertise-addr"), c.String("http-addr"))
	if err != nil {
		return replica.Etcd{}, fmt.Errorf("--advertise-addr: %w", err)
	}
	return replica.Etcd{Master: etcdmaster.Config{
		Limits: limits,
		ID:     c.String("node-id"), APIAddr: apiAdvertise,
		Store: store.EtcdConfig{
			Endpoints: endpoints, TTL: ttl, MaxStateBytes: maxState,
			LockPath: prefix + "/lock", AddrPath: rpc.EtcdAddrKey(prefix), StatePath: prefix + "/state",
		},
		MembersPath:   prefix + "/members/",
		FailoverGrace: c.Duration("failover-grace"), Clock: testClock(c, logger), Logger: logger,
	}}, nil
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
