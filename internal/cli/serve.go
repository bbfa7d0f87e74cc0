package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/internal/auth"
	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/raftmaster/raftmaster/internal/quota"
	"github.com/raftmaster/raftmaster/internal/replica"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/raftmaster/raftmaster/store"
	"github.com/raftmaster/raftmaster/store/etcdkeys"
	"github.com/urfave/cli/v2"
)

// envPrefix prefixes every flag's environment variable.
const envPrefix = "RAFTMASTER_"

// env returns the environment variable name of a flag.
func env(flag string) []string {
	return []string{envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))}
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run one replica of the cluster",
		UsageText: "raftmaster serve --node-id n1 --data-dir DIR --raft-addr 127.0.0.1:7001 --http-addr 127.0.0.1:8001 \\\n" +
			"    --peers n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003\n" +
			"raftmaster serve --node-id n4 --data-dir DIR --raft-addr 127.0.0.1:7004 --http-addr 127.0.0.1:8004 --members 127.0.0.1:8001",
		Description: "Starts a replica: Raft on --raft-addr, the HTTP API on --http-addr.\n\n" +
			"A new cluster bootstraps from --peers: start every node with the same list. A node\n" +
			"becomes a member of a running cluster with --members and the API address of any\n" +
			"member, which it asks for membership (--join is the flag's earlier name). A restarted\n" +
			"node needs neither: its state is in --data-dir.\n\n" +
			"Where volumes can be lost or nodes come and go (Kubernetes, compose), start every\n" +
			"node with the same --members list, the founding members first, and --bootstrap-expect N\n" +
			"instead: a node with an empty --data-dir asks every --members address for its state. If\n" +
			"any has state of a cluster, it becomes its member; only when all N founding members\n" +
			"answer with none do they bootstrap one, together. An empty volume never starts a\n" +
			"second cluster beside a running one.\n\n" +
			"A listen address on 0.0.0.0 or [::] is advertised under the host name unless\n" +
			"--raft-advertise or --advertise-addr say otherwise.\n\n" +
			"With --backend etcd the node is one master of the etcd-backed parity mode instead:\n" +
			"the master that holds the etcd lock serves, saving its whole state to etcd after each\n" +
			"change, and the others stand by and redirect. It needs --etcd-endpoints, not --data-dir,\n" +
			"--raft-addr, --peers or --members.\n\n" +
			"The limit flags (--max-jobs, --max-job-tasks, ... --job-ttl) set a new cluster's limits: its\n" +
			"first leader proposes them. The limits are then part of the replicated state, and later\n" +
			"leaders keep them whatever their own flags, so a fail-over never changes them; a node whose\n" +
			"flags differ logs each limit that does. Change them with raftmaster limits set.\n\n" +
			"Every flag can also be set through an environment variable, shown in brackets.\n" +
			"SIGTERM or Ctrl-C hands leadership to another node before the process exits.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "node-id", Usage: "unique id of this node", Required: true, EnvVars: env("node-id")},
			&cli.StringFlag{Name: "data-dir", Usage: "directory for the Raft log and snapshots (required with the raft backend)", EnvVars: env("data-dir")},
			&cli.StringFlag{Name: "backend", Usage: "raft (replicated log) or etcd (one active master, state in etcd)", Value: "raft", EnvVars: env("backend")},
			&cli.StringFlag{Name: "etcd-endpoints", Usage: "etcd client URLs, comma separated (etcd backend)", EnvVars: env("etcd-endpoints")},
			&cli.StringFlag{Name: "etcd-prefix", Usage: "etcd key prefix: the lock, address and state keys go under it (etcd backend)", Value: etcdkeys.DefaultPrefix, EnvVars: env("etcd-prefix")},
			&cli.IntFlag{Name: "etcd-max-state-bytes", Usage: "largest state saved to etcd, under etcd's --max-request-bytes; clients may fill all but 64 KiB (etcd backend)", Value: store.DefaultMaxStateBytes, EnvVars: env("etcd-max-state-bytes")},
			&cli.DurationFlag{Name: "etcd-ttl", Usage: "etcd session TTL: how soon a standby replaces a dead master (etcd backend)", Value: 10 * time.Second, EnvVars: env("etcd-ttl")},
			&cli.StringFlag{Name: "raft-addr", Usage: "address the Raft transport listens on", Value: "127.0.0.1:7001", EnvVars: env("raft-addr")},
			&cli.StringFlag{Name: "raft-advertise", Usage: "Raft address other nodes dial (default: --raft-addr)", EnvVars: env("raft-advertise")},
			&cli.StringFlag{Name: "http-addr", Usage: "address the HTTP API listens on", Value: "127.0.0.1:8001", EnvVars: env("http-addr")},
			&cli.StringFlag{Name: "advertise-addr", Usage: "API address clients are redirected to (default: --http-addr)", EnvVars: env("advertise-addr")},
			&cli.StringFlag{Name: "peers", Usage: "bootstrap configuration id=raftaddr,... (every node the same)", EnvVars: env("peers")},
			&cli.StringFlag{Name: "members", Aliases: []string{"join"}, Usage: "API addresses of members of the cluster to ask for membership, comma separated; with --bootstrap-expect, the founding members first", EnvVars: append(env("members"), env("join")...)},
			&cli.IntFlag{Name: "bootstrap-expect", Usage: "bootstrap a new cluster of the first N --members addresses once all N answer and none has state of a cluster; a node that finds a cluster becomes its member instead, never bootstrapping a second one (0: never bootstrap; ask --members for membership)", EnvVars: env("bootstrap-expect")},
			&cli.StringFlag{Name: "auth-tokens", Usage: "require bearer tokens: a file of 'ROLE TOKEN [JOBS]' lines, ROLE trainer or operator, JOBS (trainers only) the comma-separated job names or path.Match patterns the token covers, every job when left out; readable by the server's user only (chmod 600); reloaded on SIGHUP (default: no tokens; anyone who reaches the port may do anything)", EnvVars: env("auth-tokens"), TakesFile: true},
			&cli.Float64Flag{Name: "write-quota", Usage: "writes a second each token may make on the leader, past its burst; more are answered 429 with Retry-After (default with --auth-tokens: 10000; without tokens the quota, if set, is per source address; 0: none)", EnvVars: env("write-quota")},
			&cli.Float64Flag{Name: "write-burst", Usage: "writes a token may make at once before --write-quota applies (default: 100000, or 10 seconds of --write-quota)", EnvVars: env("write-burst")},
			&cli.Float64Flag{Name: "client-quota", Usage: "new client identities (de-duplication ids) a second each token may start, past its burst (default with --auth-tokens: 2048; without tokens, per source address if set; 0: none)", EnvVars: env("client-quota")},
			&cli.Float64Flag{Name: "client-burst", Usage: "new client identities a token may start at once (default: 131072, or 64 seconds of --client-quota)", EnvVars: env("client-burst")},
			&cli.StringFlag{Name: "tls-cert", Usage: "serve the API over HTTPS and run Raft over mutual TLS with this PEM certificate (valid for server and client authentication, for every name the node is reached at; see raftmaster tls gen); reloaded on SIGHUP", EnvVars: env("tls-cert"), TakesFile: true},
			&cli.StringFlag{Name: "tls-key", Usage: "the PEM private key of --tls-cert; reloaded on SIGHUP", EnvVars: env("tls-key"), TakesFile: true},
			&cli.StringFlag{Name: "tls-ca", Usage: "PEM CA certificate(s) that sign every node's certificate: Raft peers must present one, and the node trusts only it when it calls the others; reloaded on SIGHUP; without --tls-cert it is not used", EnvVars: env("tls-ca"), TakesFile: true},
			&cli.StringFlag{Name: "cluster-key-file", Usage: "run Raft over mutual TLS with certificates derived from this cluster key, a secret every node shares (make it with raftmaster keygen); the API stays plain HTTP unless --tls-cert is given too", EnvVars: env("cluster-key-file"), TakesFile: true},
			&cli.BoolFlag{Name: "insecure", Usage: "run Raft without authentication or encryption when neither --cluster-key-file nor --tls-cert is given: anyone who reaches --raft-addr can then write the cluster's state (only on an isolated network, or to run beside nodes of an earlier release)", EnvVars: env("insecure")},
			&cli.StringFlag{Name: "dataset-root", Usage: "index datasets only under this directory: relative patterns are taken under it, and files and symbolic links that lead outside it are refused unread (default: anywhere the process can read; a node whose API other hosts reach warns)", EnvVars: env("dataset-root")},
			&cli.StringSliceFlag{Name: "dataset-buckets", Usage: "object-store locations datasets may be read from, e.g. s3://bucket/prefix or gs://bucket (repeat, or separate with commas); an s3:// or gs:// pattern outside them is refused unread (default: none, so object-store patterns are refused)", EnvVars: env("dataset-buckets")},
			&cli.StringFlag{Name: "s3-endpoint", Usage: "S3-compatible endpoint of s3:// datasets: host[:port] over HTTPS, or an http:// or https:// URL (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else s3.amazonaws.com); credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the shared credentials file, or the IAM role", EnvVars: env("s3-endpoint")},
			&cli.StringFlag{Name: "s3-region", Usage: "region of s3:// requests (default: AWS_REGION, AWS_DEFAULT_REGION, else the bucket's)", EnvVars: env("s3-region")},
			&cli.StringFlag{Name: "s3-path-style", Usage: "name the bucket in the path (true, as MinIO wants), in the host name (false), or let the endpoint decide (auto)", Value: "auto", EnvVars: env("s3-path-style")},
			&cli.IntFlag{Name: "chunks-per-task", Usage: "default chunks per task of a dataset", Value: httpapi.DefaultDatasetParams.ChunksPerTask, EnvVars: env("chunks-per-task")},
			&cli.DurationFlag{Name: "task-timeout", Usage: "default lease of a dispatched task", Value: httpapi.DefaultDatasetParams.TaskTimeout, EnvVars: env("task-timeout")},
			&cli.IntFlag{Name: "failure-max", Usage: "default failures or timeouts a task survives before it is set aside for the pass", Value: httpapi.DefaultDatasetParams.FailureMax, EnvVars: env("failure-max")},
			&cli.DurationFlag{Name: "session-ttl", Usage: "TTL of a session whose client names none: how long the leader keeps a client's session, and the tasks and keys it holds, after its last keep-alive (1s to 1h)", Value: rpc.DefaultSessionTTL, EnvVars: env("session-ttl")},
			&cli.DurationFlag{Name: "heartbeat-timeout", Usage: "Raft heartbeat timeout: a follower notices a dead leader after 1 to 2 of these; raise it on slow or lossy networks, where spurious elections waste work", Value: raftnode.DefaultHeartbeatTimeout, EnvVars: env("heartbeat-timeout")},
			&cli.DurationFlag{Name: "election-timeout", Usage: "Raft election timeout (>= heartbeat timeout): how long a candidate waits before it tries again", Value: raftnode.DefaultElectionTimeout, EnvVars: env("election-timeout")},
			&cli.DurationFlag{Name: "leader-lease-timeout", Usage: "Raft leader lease (<= heartbeat timeout): a leader cut off from a quorum steps down after this long", Value: raftnode.DefaultLeaderLeaseTimeout, EnvVars: env("leader-lease-timeout")},
			&cli.DurationFlag{Name: "failover-grace", Usage: "deadlines a new leader extends to at least now+grace", Value: 5 * time.Second, EnvVars: env("failover-grace")},
			&cli.Uint64Flag{Name: "snapshot-threshold", Usage: "log entries between snapshots, at least: a snapshot also waits until the applies since the last one took as long as that snapshot did", Value: 8192, EnvVars: env("snapshot-threshold")},
			&cli.DurationFlag{Name: "snapshot-interval", Usage: "how often to check --snapshot-threshold (at a random time between this and twice this)", Value: 30 * time.Second, EnvVars: env("snapshot-interval")},
			&cli.Uint64Flag{Name: "trailing-logs", Usage: "log entries kept after a snapshot, for followers to catch up from", Value: 10240, EnvVars: env("trailing-logs")},
			&cli.StringFlag{Name: "log-level", Usage: "trace, debug, info, warn or error", Value: "info", EnvVars: env("log-level")},
			&cli.BoolFlag{Name: "log-json", Usage: "log in JSON", EnvVars: env("log-json")},
			memoryLimitFlag(),
			&cli.StringFlag{Name: "pprof-addr", Usage: "serve Go's CPU, heap and goroutine profiles (/debug/pprof/) on this address, apart from the API; off when empty. A loopback address only (profiles reveal internals), unless --pprof-remote", EnvVars: env("pprof-addr")},
			&cli.DurationFlag{Name: "test-clock-offset", Hidden: true, Usage: "offset this node's clock (fault-injection tests)", EnvVars: env("test-clock-offset")},
			&cli.StringFlag{Name: "test-clock-file", Hidden: true, Usage: "read a clock offset (a Go duration) from this file, re-read as it changes (fault-injection tests)"},
			&cli.StringFlag{Name: "test-raft-dial", Hidden: true, Usage: "id=addr,...: dial these peers at these addresses (fault-injection proxies)"},
		}, append(append(limitFlags(true), boundFlags()...), etcdFlags()...)...),
		Action: runServe,
	}
}

// serveLogger is the logger of a serve process, named after the node.
func serveLogger(c *cli.Context) (hclog.Logger, error) {
	if hclog.LevelFromString(c.String("log-level")) == hclog.NoLevel {
		return nil, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", c.String("log-level"))
	}
	return newLogger(c, c.String("node-id")), nil
}

// datasetDefaults reads the dataset flags of serve.
func datasetDefaults(c *cli.Context) (fsm.DatasetParams, error) {
	params := fsm.DatasetParams{
		ChunksPerTask: c.Int("chunks-per-task"), TaskTimeout: c.Duration("task-timeout"), FailureMax: c.Int("failure-max"),
	}
	if params.ChunksPerTask < 1 || params.TaskTimeout <= 0 || params.FailureMax < 0 {
		return params, fmt.Errorf("--chunks-per-task must be >= 1, --task-timeout > 0 and --failure-max >= 0")
	}
	return params, nil
}

// reloader is something SIGHUP reloads: the token file, the TLS
// material.
type reloader struct {
	what   string
	reload func() error
}

// reloadOnHangup reloads each of rs whenever the process gets SIGHUP; one
// that does not load keeps what it had in use.
func reloadOnHangup(logger hclog.Logger, rs []reloader) {
	if len(rs) == 0 {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			for _, r := range rs {
				if err := r.reload(); err != nil {
					logger.Error("SIGHUP: "+r.what+" in use stay", "error", err)
					continue
				}
				logger.Info("SIGHUP: " + r.what + " reloaded")
			}
		}
	}()
}

// tlsStore reads the TLS flags: all three, or no certificate and key. A
// CA alone does not turn TLS on: RAFTMASTER_TLS_CA is also the CLI's
// variable, which a shell that talks to a TLS cluster exports.
func tlsStore(c *cli.Context) (*certs.Store, error) {
	cert, key, ca := c.String("tls-cert"), c.String("tls-key"), c.String("tls-ca")
	if cert == "" && key == "" {
		return nil, nil
	}
	if cert == "" || key == "" || ca == "" {
		return nil, fmt.Errorf("TLS needs --tls-cert, --tls-key and --tls-ca together")
	}
	return certs.Load(cert, key, ca)
}

// waitForSignal blocks until SIGINT or SIGTERM, or until lost is closed;
// it reports the signal, or "" for lost.
func waitForSignal(lost <-chan struct{}) string {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case sig := <-sigs:
		return sig.String()
	case <-lost:
		return ""
	}
}

func newLogger(c *cli.Context, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.LevelFromString(c.String("log-level")),
		JSONFormat: c.Bool("log-json"),
		Output:     c.App.ErrWriter,
	})
}

// replicaConfig reads what both backends share: the logger and the HTTP
// API with its dataset defaults.
func replicaConfig(c *cli.Context) (replica.Config, error) {
	logger, err := serveLogger(c)
	if err != nil {
		return replica.Config{}, err
	}
	params, err := datasetDefaults(c)
	if err != nil {
		return replica.Config{}, err
	}
	root := c.String("dataset-root")
	if root != "" {
		abs, err := filepath.Abs(root)
		if err != nil {
			return replica.Config{}, fmt.Errorf("--dataset-root: %w", err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return replica.Config{}, fmt.Errorf("--dataset-root %q: not a directory", root)
		}
		root = abs
	}
	warnDatasetRoot(logger, c.String("http-addr"), root)
	api := httpapi.Config{DatasetDefaults: params, DatasetRoot: root, SessionTTL: c.Duration("session-ttl")}
	if api.ObjectStore, api.DatasetBuckets, err = datasetBuckets(c); err != nil {
		return replica.Config{}, err
	}
	if ttl := api.SessionTTL; ttl < fsm.MinSessionTTL || ttl > fsm.MaxSessionTTL {
		return replica.Config{}, fmt.Errorf("--session-ttl %v: want %v to %v", ttl, fsm.MinSessionTTL, fsm.MaxSessionTTL)
	}
	limits, err := httpLimits(c)
	if err != nil {
		return replica.Config{}, err
	}
	var reload []reloader
	store, err := tlsStore(c)
	if err != nil {
		return replica.Config{}, err
	}
	if store != nil {
		if name, ok := certs.NodeName(store.Leaf()); ok && name != c.String("node-id") {
			return replica.Config{}, fmt.Errorf("--tls-cert %s is the certificate of node %q, not of --node-id %q: its peers would refuse it", c.String("tls-cert"), name, c.String("node-id"))
		}
		reload = append(reload, reloader{"TLS certificates", store.Reload})
		logger.Info("TLS on: HTTPS API, mutual TLS between nodes", "certificate_expires", store.NotAfter().UTC().Format(time.RFC3339))
	}
	token := ""
	if path := c.String("auth-tokens"); path != "" {
		tokens, err := auth.Load(path)
		if err != nil {
			return replica.Config{}, fmt.Errorf("--auth-tokens: %w", err)
		}
		if token = tokens.Operator(); token == "" {
			return replica.Config{}, fmt.Errorf("--auth-tokens %s: no operator token, which the nodes present to each other", path)
		}
		api.Tokens = tokens
		reload = append(reload, reloader{"tokens", tokens.Reload})
	}
	api.WriteQuota = quotaFlags(c, "write", api.Tokens != nil, httpapi.DefaultWriteQuota)
	api.ClientQuota = quotaFlags(c, "client", api.Tokens != nil, httpapi.DefaultClientQuota)
	if api.WriteQuota.On() || api.ClientQuota.On() {
		per := "token"
		if api.Tokens == nil {
			per = "source address"
		}
		logger.Info("write quotas on the leader", "per", per,
			"writes_per_second", api.WriteQuota.PerSecond, "write_burst", api.WriteQuota.Burst,
			"new_clients_per_second", api.ClientQuota.PerSecond, "new_client_burst", api.ClientQuota.Burst)
	}
	reloadOnHangup(logger, reload)
	return replica.Config{HTTPAddr: c.String("http-addr"), API: api, Logger: logger, Token: token, TLS: store, HTTP: limits}, nil
}

// quotaFlags reads --NAME-quota and --NAME-burst: def when neither is
// given and the server requires tokens, no quota when neither is given
// and it does not, or --NAME-quota is 0.
func quotaFlags(c *cli.Context, name string, tokens bool, def quota.Rate) quota.Rate {
	rate, burst := name+"-quota", name+"-burst"
	if !c.IsSet(rate) && !c.IsSet(burst) {
		if tokens {
			return def
		}
		return quota.Rate{}
	}
	r := def
	if c.IsSet(rate) {
		r.PerSecond = c.Float64(rate)
		r.Burst = r.PerSecond * def.Burst / def.PerSecond
	}
	if c.IsSet(burst) {
		r.Burst = c.Float64(burst)
	}
	return r
}

// jobLimits reads the limit flags, a new cluster's initial limits: its
// first leader proposes them (see leader.TakeOver); raftmaster limits set
// changes them afterwards.
func jobLimits(c *cli.Context) (*fsm.Limits, error) {
	l := &fsm.Limits{
		MaxJobs: c.Int("max-jobs"), MaxJobTasks: c.Int("max-job-tasks"), MaxJobChunks: c.Int("max-job-chunks"),
		MaxJobGroups: c.Int("max-job-groups"), MaxJobGroupBytes: c.Int64("max-job-group-bytes"),
		MaxStateBytes: c.Int64("max-state-bytes"), JobTTL: c.Duration("job-ttl"),
		MaxJobKVKeys: c.Int("max-job-kv-keys"), MaxKVValueBytes: c.Int64("max-kv-value-bytes"),
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	return l, nil
}

// raftConfig reads the flags of the Raft backend.
func raftConfig(c *cli.Context, logger hclog.Logger) (replica.Raft, error) {
	if c.String("data-dir") == "" {
		return replica.Raft{}, fmt.Errorf("--data-dir is required with the raft backend")
	}
	var peers []raftnode.Peer
	if s := c.String("peers"); s != "" {
		var err error
		if peers, err = raftnode.ParsePeers(s); err != nil {
			return replica.Raft{}, fmt.Errorf("--peers: %w", err)
		}
	}
	members := splitList(c.String("members"))
	if len(peers) > 0 && len(members) > 0 {
		return replica.Raft{}, fmt.Errorf("give --peers or --members (--join), not both")
	}
	expect := c.Int("bootstrap-expect")
	switch {
	case expect < 0:
		return replica.Raft{}, fmt.Errorf("--bootstrap-expect %d: want 0 (off) or the number of founding members", expect)
	case expect > 0 && len(members) < expect:
		return replica.Raft{}, fmt.Errorf("--bootstrap-expect %d needs the founding members' API addresses first in --members; it has %d", expect, len(members))
	}
	raftAdvertise, err := advertised(c.String("raft-advertise"), c.String("raft-addr"))
	if err != nil {
		return replica.Raft{}, fmt.Errorf("--raft-advertise: %w", err)
	}
	if err := raftnode.CheckAdvertise(cmp.Or(raftAdvertise, c.String("raft-addr"))); err != nil {
		return replica.Raft{}, err
	}
	apiAdvertise, err := advertised(c.String("advertise-addr"), c.String("http-addr"))
	if err != nil {
		return replica.Raft{}, fmt.Errorf("--advertise-addr: %w", err)
	}
	var dial map[string]string
	if s := c.String("test-raft-dial"); s != "" {
		overrides, err := raftnode.ParsePeers(s)
		if err != nil {
			return replica.Raft{}, fmt.Errorf("--test-raft-dial: %w", err)
		}
		dial = map[string]string{}
		for _, o := range overrides {
			dial[o.ID] = o.RaftAddr
		}
	}
	limits, err := jobLimits(c)
	if err != nil {
		return replica.Raft{}, err
	}
	peerTLS, err := raftCredentials(c, logger, cmp.Or(raftAdvertise, c.String("raft-addr")))
	if err != nil {
		return replica.Raft{}, err
	}
	snapshotBytes, trailingBytes, cacheBytes, err := logBounds(c)
	if err != nil {
		return replica.Raft{}, err
	}
	return replica.Raft{
		Node: raftnode.Config{
			Limits: limits,
			ID:     c.String("node-id"), DataDir: c.String("data-dir"),
			RaftAddr: c.String("raft-addr"), RaftAdvertise: raftAdvertise,
			APIAddr: apiAdvertise, Peers: peers,
			HeartbeatTimeout: c.Duration("heartbeat-timeout"), ElectionTimeout: c.Duration("election-timeout"),
			LeaderLeaseTimeout: c.Duration("leader-lease-timeout"), FailoverGrace: c.Duration("failover-grace"),
			SnapshotThreshold: c.Uint64("snapshot-threshold"), SnapshotInterval: c.Duration("snapshot-interval"),
			TrailingLogs: c.Uint64("trailing-logs"), Clock: testClock(c, logger), DialOverride: dial,
			PeerTLS:       peerTLS,
			SnapshotBytes: snapshotBytes, TrailingLogBytes: trailingBytes, LogCacheBytes: cacheBytes,
		},
		Members: members, BootstrapExpect: expect,
	}, nil
}

// errNoRaftCredentials is serve's refusal to run Raft unauthenticated.
var errNoRaftCredentials = errors.New("no credential for Raft: it would accept any peer that reaches --raft-addr and let it write the cluster's state. " +
	"Give every node the same cluster key with --cluster-key-file (make one with `raftmaster keygen --out cluster.key`), " +
	"or certificates with --tls-cert, --tls-key and --tls-ca (raftmaster tls gen), " +
	"or pass --insecure to run Raft without authentication on a network no one else reaches")

// raftCredentials returns what secures Raft besides operator certificates
// (which replica.StartRaft puts in place): the certificates derived from
// --cluster-key-file for this node and the host of its Raft address
// advertise. Without certificates or a key it refuses to go on unless
// --insecure, and an insecure node says so.
func raftCredentials(c *cli.Context, logger hclog.Logger, advertise string) (raftnode.PeerTLS, error) {
	keyFile, certFile := c.String("cluster-key-file"), c.String("tls-cert")
	switch {
	case keyFile != "" && certFile != "":
		return nil, errors.New("give --cluster-key-file or --tls-cert, not both: Raft uses one or the other")
	case certFile != "":
		return nil, nil
	case keyFile != "":
		key, err := certs.ReadClusterKey(keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cluster-key-file: %w", err)
		}
		if fi, err := os.Stat(keyFile); err == nil && fi.Mode().Perm()&0o007 != 0 {
			logger.Warn("the cluster key file is readable by every user: anyone who reads it can take part in the cluster's Raft", "file", keyFile, "mode", fi.Mode().Perm().String())
		}
		host, _, err := net.SplitHostPort(advertise)
		if err != nil {
			return nil, fmt.Errorf("--raft-advertise %q: %w", advertise, err)
		}
		store, err := certs.FromClusterKey(key, c.String("node-id"), []string{host})
		if err != nil {
			return nil, err
		}
		logger.Info("Raft runs over mutual TLS with certificates derived from the cluster key", "file", keyFile)
		return store, nil
	case c.Bool("insecure"):
		logger.Warn("--insecure: Raft accepts any peer, unauthenticated and unencrypted: anyone who reaches " +
			c.String("raft-addr") + " can write the cluster's state; keep the port on a network no one else reaches")
		return nil, nil
	}
	return nil, errNoRaftCredentials
}

// advertised returns the address to advertise for a listener on listen:
// advertise when set; otherwise listen, but with the host name for an
// unspecified host (0.0.0.0, [::] or none), which no other node could
// dial. A port 0 is left for the listener to fill in.
func advertised(advertise, listen string) (string, error) {
	if advertise != "" {
		return advertise, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "0" {
		return "", nil // the listener reports the error, or the bound port
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return "", nil
	}
	name, err := os.Hostname()
	if err != nil || name == "" {
		return "", fmt.Errorf("listening on %s, and no host name to advertise instead: %v", listen, err)
	}
	return net.JoinHostPort(name, port), nil
}

func runServe(c *cli.Context) error {
	cfg, err := replicaConfig(c)
	if err != nil {
		return err
	}
	if _, err := applyMemoryLimit(c.String("memory-limit"), cfg.Logger); err != nil {
		return err
	}
	if addr := c.String("pprof-addr"); addr != "" {
		if err := checkPprofAddr(addr, c.Bool("pprof-remote"), cfg.Logger); err != nil {
			return fmt.Errorf("--pprof-addr: %w", err)
		}
		if err := servePprof(addr, cfg.Logger); err != nil {
			return fmt.Errorf("--pprof-addr: %w", err)
		}
	}
	var r *replica.Replica
	switch c.String("backend") {
	case "raft":
		rc, err := raftConfig(c, cfg.Logger)
		if err != nil {
			return err
		}
		if r, err = replica.StartRaft(cfg, rc); err != nil {
			return err
		}
	case "etcd":
		ec, err := etcdConfig(c, cfg.Logger)
		if err != nil {
			return err
		}
		if r, err = replica.StartEtcd(cfg, ec); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--backend %q: want raft or etcd", c.String("backend"))
	}
	sig := waitForSignal(r.Stopped())
	if sig == "" {
		_ = shutdownWithin(cfg.Logger, r, shutdownTimeout)
		return fmt.Errorf("stopped: %w; exiting", r.Err())
	}
	cfg.Logger.Info("shutting down", "signal", sig)
	return shutdownWithin(cfg.Logger, r, shutdownTimeout)
}

// shutdownTimeout bounds a graceful stop: the leadership hand-over, Raft's
// own stop and the HTTP server's.
const shutdownTimeout = 15 * time.Second

// shutdownWithin stops r gracefully, or gives up after timeout and a few
// seconds more, so that a stop signal always ends the process: whatever
// did not stop in time ends with it. The data on disk is safe either
// way: Raft syncs every write before acknowledging it.
func shutdownWithin(log hclog.Logger, r *replica.Replica, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Shutdown(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout + 5*time.Second):
		log.Error("the graceful stop did not finish in time; exiting now", "timeout", timeout)
		return errors.New("the graceful stop did not finish in time")
	}
}

// testClock returns the node's clock: the wall clock, shifted by the hidden
// --test-clock-offset and by the offset in --test-clock-file, which a
// fault-injection test rewrites to make the clock jump.
func testClock(c *cli.Context, logger hclog.Logger) func() time.Time {
	static := c.Duration("test-clock-offset")
	path := c.String("test-clock-file")
	if static == 0 && path == "" {
		return time.Now
	}
	logger.Warn("clock offset for testing", "offset", static, "file", path)
	var dynamic atomic.Int64
	if path != "" {
		go func() {
			last := ""
			for {
				if b, err := os.ReadFile(path); err == nil && string(b) != last {
					last = string(b)
					if d, err := time.ParseDuration(strings.TrimSpace(last)); err == nil {
						dynamic.Store(int64(d))
						logger.Warn("clock offset changed", "offset", d)
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return func() time.Time { return time.Now().Add(static + time.Duration(dynamic.Load())) }
}
