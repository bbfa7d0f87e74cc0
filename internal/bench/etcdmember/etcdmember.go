// Package etcdmember runs the etcd cluster of raftmaster-bench: members of
// etcd's own server (go.etcd.io/etcd/server/v3/embed), each in a child
// process of the bench binary, so that nothing needs installing and each
// member has a process of its own, as a real deployment would. Members run
// with etcd's defaults (fsync on, 1.5 MiB request limit, 2 GiB quota), plus
// periodic auto-compaction, without which the etcd backend of raftmaster,
// which rewrites its whole state at every change, keeps every old version
// of it until the quota fills.
package etcdmember

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/raftmaster/raftmaster/internal/procs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Mode is the first argument that makes the bench binary an etcd member.
const Mode = "etcd-member"

// Main runs one member until SIGTERM or SIGINT; args are its flags, and
// etcd's warnings go to stderr. It returns the exit code.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(Mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "member name")
	dir := fs.String("dir", "", "data directory")
	client := fs.String("client-url", "", "client URL, http://127.0.0.1:port")
	peer := fs.String("peer-url", "", "peer URL, http://127.0.0.1:port")
	initial := fs.String("initial-cluster", "", "name=peerURL,... of every member")
	compaction := fs.Duration("auto-compaction", 30*time.Second, "periodic auto-compaction retention; 0 disables it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cu, err1 := url.Parse(*client)
	pu, err2 := url.Parse(*peer)
	if err1 != nil || err2 != nil || *name == "" || *dir == "" || *initial == "" {
		fmt.Fprintln(stderr, "etcd member: need --name, --dir, --client-url, --peer-url and --initial-cluster")
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = *initial
	cfg.InitialClusterToken = "raftmaster-bench"
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"stderr"}
	if *compaction > 0 {
		cfg.AutoCompactionMode = embed.CompactorModePeriodic
		cfg.AutoCompactionRetention = compaction.String()
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "etcd member %s: %v\n", *name, err)
		return 1
	}
	defer e.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case <-ctx.Done():
		return 0
	case err := <-e.Err():
		fmt.Fprintf(stderr, "etcd member %s: %v\n", *name, err)
		return 1
	}
}

// Cluster is a running etcd cluster of child processes.
type Cluster struct {
	Procs []*procs.Proc
	// Endpoints are the members' client URLs.
	Endpoints []string
}

// Start launches members etcd members from exe (the bench binary, which
// runs Main when its first argument is Mode) with their data and logs
// under dir, and waits until each answers. compaction is the periodic
// auto-compaction retention (0: none).
func Start(ctx context.Context, exe, dir string, members int, compaction time.Duration) (*Cluster, error) {
	c := &Cluster{}
	clients, peers := make([]string, members), make([]string, members)
	var initial []string
	for i := range members {
		ca, err := procs.FreeAddr()
		if err != nil {
			return nil, err
		}
		pa, err := procs.FreeAddr()
		if err != nil {
			return nil, err
		}
		clients[i], peers[i] = "http://"+ca, "http://"+pa
		initial = append(initial, fmt.Sprintf("e%d=%s", i+1, peers[i]))
	}
	for i := range members {
		name := fmt.Sprintf("e%d", i+1)
		p := &procs.Proc{ID: name, APIAddr: strings.TrimPrefix(clients[i], "http://"), DataDir: filepath.Join(dir, name),
			LogPath: filepath.Join(dir, name+".log"),
			Args: []string{Mode, "--name", name, "--dir", filepath.Join(dir, name), "--client-url", clients[i],
				"--peer-url", peers[i], "--initial-cluster", strings.Join(initial, ","), "--auto-compaction", compaction.String()}}
		if err := p.Launch(exe); err != nil {
			c.Stop()
			return nil, err
		}
		c.Procs = append(c.Procs, p)
	}
	c.Endpoints = clients
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.waitHealthy(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("etcd: %w\n%s", err, procs.LogTail(c.Procs, 10))
	}
	return c, nil
}

// waitHealthy waits until every member answers a status request and a
// write through the cluster succeeds.
func (c *Cluster) waitHealthy(ctx context.Context) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	for _, ep := range c.Endpoints {
		for {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Status(sctx, ep)
			cancel()
			if err == nil {
				break
			}
			for _, p := range c.Procs {
				if !p.Running() {
					return fmt.Errorf("member %s exited", p.ID)
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("member %s not answering: %v", ep, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cli.Put(pctx, "/raftmaster-bench/ready", "1")
	return err
}

// Stop stops every member (SIGTERM, then SIGKILL after 10 s) and removes
// nothing: the caller owns dir.
func (c *Cluster) Stop() { procs.StopAll(c.Procs, 10*time.Second) }

// Remove deletes the members' data directories, to free disk between
// experiments.
func (c *Cluster) Remove() {
	for _, p := range c.Procs {
		_ = os.RemoveAll(p.DataDir)
	}
}
