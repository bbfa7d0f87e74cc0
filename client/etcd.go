package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WithEtcd finds the active master of the etcd backend through etcd, as the
// seed's option of the same name did: NewClient waits up to timeout for a
// master to publish its address at /master/addr, and the client follows
// that key as masters fail over. It can be combined with WithAddrs, whose
// addresses are tried when the published one does not answer.
func WithEtcd(endpoints []string, timeout time.Duration) Option {
	return func(c *Client) error {
		if len(endpoints) == 0 {
			return errors.New("raftmaster client: WithEtcd needs at least one etcd endpoint")
		}
		if timeout <= 0 {
			return fmt.Errorf("raftmaster client: WithEtcd timeout %v must be positive", timeout)
		}
		c.etcdEndpoints = endpoints
		c.etcdTimeout = timeout
		if c.etcdAddrKey == "" {
			c.etcdAddrKey = store.DefaultAddrPath
		}
		return nil
	}
}

// WithEtcdPrefix makes WithEtcd follow the masters started with serve
// --etcd-prefix prefix: the address is read at prefix+"/addr" instead of
// /master/addr.
func WithEtcdPrefix(prefix string) Option {
	return func(c *Client) error {
		if !strings.HasPrefix(prefix, "/") {
			return fmt.Errorf("raftmaster client: etcd prefix %q: want an absolute key such as /master", prefix)
		}
		c.etcdAddrKey = strings.TrimSuffix(prefix, "/") + "/addr"
		return nil
	}
}

// discoverMaster connects to etcd and waits for a published master
// address; it returns the etcd client for the watch that follows.
func (c *Client) discoverMaster() (*clientv3.Client, string, error) {
	cli, err := store.NewEtcdClient(c.etcdEndpoints, c.etcdTimeout, 0)
	if err != nil {
		return nil, "", fmt.Errorf("raftmaster client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.etcdTimeout)
	defer cancel()
	found := make(chan string, 1)
	go store.WatchMasterAddr(ctx, cli, c.etcdAddrKey, func(addr string) {
		if addr != "" {
			select {
			case found <- addr:
			default:
			}
		}
	})
	select {
	case addr := <-found:
		return cli, addr, nil
	case <-ctx.Done():
		cli.Close()
		return nil, "", fmt.Errorf("raftmaster client: no master published its address at %s in etcd %v within %v",
			c.etcdAddrKey, c.etcdEndpoints, c.etcdTimeout)
	}
}

// followMaster points the client at every address the active master
// publishes, until the client is closed.
func (c *Client) followMaster(cli *clientv3.Client) {
	defer cli.Close()
	store.WatchMasterAddr(c.ctx, cli, c.etcdAddrKey, func(addr string) {
		if addr == "" {
			return
		}
		base, err := normalizeAddr(addr)
		if err != nil {
			c.logger.Warn("ignoring a malformed master address in etcd", "addr", addr, "error", err)
			return
		}
		c.ep.use(base)
	})
}
