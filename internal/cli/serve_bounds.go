package cli

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/internal/replica"
	"github.com/raftmaster/raftmaster/objstore"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/urfave/cli/v2"
)

// boundFlags are serve's flags that bound connections, requests and the
// Raft log's memory and disk.
func boundFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "max-connections", Usage: "API connections open at once; more wait to be accepted", Value: replica.DefaultMaxConnections, EnvVars: env("max-connections")},
		&cli.DurationFlag{Name: "http-header-timeout", Usage: "time a client has to send a request's headers, from the connection's opening or its previous request", Value: replica.DefaultReadHeaderTimeout, EnvVars: env("http-header-timeout")},
		&cli.DurationFlag{Name: "http-read-timeout", Usage: "time a client has to send a request's body; raise it for large chunk lists over slow links", Value: replica.DefaultReadTimeout, EnvVars: env("http-read-timeout")},
		&cli.DurationFlag{Name: "http-write-timeout", Usage: "a client that reads nothing of an answer for this long is cut off (long answers and long-poll holds are not)", Value: replica.DefaultWriteTimeout, EnvVars: env("http-write-timeout")},
		&cli.DurationFlag{Name: "http-idle-timeout", Usage: "how long a kept-alive connection may wait for its next request; keep it above the 60s long-poll hold", Value: replica.DefaultIdleTimeout, EnvVars: env("http-idle-timeout")},
		&cli.IntFlag{Name: "http-max-header-bytes", Usage: "largest request headers", Value: replica.DefaultMaxHeaderBytes, EnvVars: env("http-max-header-bytes")},
		&cli.Int64Flag{Name: "snapshot-bytes", Usage: "take a snapshot once the log since the last one holds this many bytes (or as many as that snapshot, if more), whatever --snapshot-threshold says", Value: raftnode.DefaultSnapshotBytes, EnvVars: env("snapshot-bytes")},
		&cli.Int64Flag{Name: "trailing-log-bytes", Usage: "after a snapshot, keep at most this many bytes of the latest log entries (and at most --trailing-logs entries) for followers to catch up from", Value: raftnode.DefaultTrailingLogBytes, EnvVars: env("trailing-log-bytes")},
		&cli.Int64Flag{Name: "log-cache-bytes", Usage: "bytes of the latest log entries kept in memory for replication", Value: raftnode.DefaultLogCacheBytes, EnvVars: env("log-cache-bytes")},
		&cli.BoolFlag{Name: "pprof-remote", Usage: "let --pprof-addr listen on an address other hosts reach (profiles reveal internals, and anyone who reaches the address may take them)", EnvVars: env("pprof-remote")},
	}
}

// httpLimits reads the connection and request bounds of serve.
func httpLimits(c *cli.Context) (replica.HTTPLimits, error) {
	l := replica.HTTPLimits{
		ReadHeaderTimeout: c.Duration("http-header-timeout"), ReadTimeout: c.Duration("http-read-timeout"),
		WriteTimeout: c.Duration("http-write-timeout"), IdleTimeout: c.Duration("http-idle-timeout"),
		MaxHeaderBytes: c.Int("http-max-header-bytes"), MaxConnections: c.Int("max-connections"),
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"http-header-timeout", l.ReadHeaderTimeout}, {"http-read-timeout", l.ReadTimeout}, {"http-write-timeout", l.WriteTimeout}, {"http-idle-timeout", l.IdleTimeout}} {
		if d.v <= 0 {
			return l, fmt.Errorf("--%s %v: want a positive duration", d.flag, d.v)
		}
	}
	if l.MaxHeaderBytes < 4096 {
		return l, fmt.Errorf("--http-max-header-bytes %d: want at least 4096", l.MaxHeaderBytes)
	}
	if l.MaxConnections < 1 {
		return l, fmt.Errorf("--max-connections %d: want at least 1", l.MaxConnections)
	}
	return l, nil
}

// logBounds reads the byte bounds of the Raft log.
func logBounds(c *cli.Context) (snapshot, trailing, cache int64, err error) {
	snapshot, trailing, cache = c.Int64("snapshot-bytes"), c.Int64("trailing-log-bytes"), c.Int64("log-cache-bytes")
	for _, f := range []struct {
		flag string
		v    int64
	}{{"snapshot-bytes", snapshot}, {"trailing-log-bytes", trailing}, {"log-cache-bytes", cache}} {
		if f.v < 1<<20 {
			return 0, 0, 0, fmt.Errorf("--%s %d: want at least 1 MiB", f.flag, f.v)
		}
	}
	return snapshot, trailing, cache, nil
}

// loopback reports whether addr's host is a loopback address or
// "localhost"; an empty or unspecified host (all interfaces) is not.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkPprofAddr refuses a profile address that other hosts may reach,
// unless --pprof-remote says so; then it warns.
func checkPprofAddr(addr string, remote bool, logger hclog.Logger) error {
	if loopback(addr) {
		return nil
	}
	if !remote {
		return fmt.Errorf("%s is not a loopback address: profiles reveal the process's internals to anyone who reaches it; "+
			"use 127.0.0.1:PORT, or give --pprof-remote to serve them there anyway", addr)
	}
	logger.Warn("serving profiles on an address other hosts may reach (--pprof-remote)", "addr", addr)
	return nil
}

// warnDatasetRoot warns a node whose API other hosts may reach and that
// indexes datasets anywhere the process can read.
func warnDatasetRoot(logger hclog.Logger, httpAddr, root string) {
	if root == "" && !loopback(httpAddr) {
		logger.Warn("no --dataset-root: a client may have the leader index any file this process can read; " +
			"give --dataset-root with the directory the datasets are in")
	}
}

// datasetBuckets reads --dataset-buckets and the object-store flags: the
// store the leader reads object-store datasets with, and the locations it
// may read. Without --dataset-buckets there is no store, and every
// object-store pattern is refused.
func datasetBuckets(c *cli.Context) (*objstore.Store, []string, error) {
	var entries []string
	for _, v := range c.StringSlice("dataset-buckets") {
		for e := range strings.SplitSeq(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	}
	if _, err := objstore.ParseAllowlist(entries); err != nil {
		return nil, nil, fmt.Errorf("--dataset-buckets: %w", err)
	}
	cfg, err := objstore.ConfigFromEnv()
	if err != nil {
		return nil, nil, err
	}
	if v := c.String("s3-endpoint"); v != "" {
		cfg.S3Endpoint = v
	}
	if v := c.String("s3-region"); v != "" {
		cfg.S3Region = v
	}
	if cfg.S3PathStyle, err = objstore.ParsePathStyle(c.String("s3-path-style")); err != nil {
		return nil, nil, fmt.Errorf("--s3-path-style: %w", err)
	}
	if len(entries) == 0 {
		return nil, nil, nil
	}
	return objstore.New(cfg), entries, nil
}
