package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/urfave/cli/v2"
)

// addrFlag is the --addr flag of every command that talks to a cluster.
func addrFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "addr",
		Usage:   "API address of any node, or several comma separated",
		Value:   "127.0.0.1:8001",
		EnvVars: env("addr"),
	}
}

// retryFlag bounds how long a command keeps retrying while no leader answers.
func retryFlag() cli.Flag {
	return &cli.DurationFlag{Name: "retry", Usage: "give up after retrying this long while the cluster has no leader", Value: 30 * time.Second}
}

// jobFlag is the --job flag of the commands that act on one job.
func jobFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "job",
		Usage:   "the job to act on: a DNS label such as resnet-2026-11-30 (see raftmaster job list)",
		Value:   "default",
		EnvVars: env("job"),
	}
}

// newClient builds a client from --addr, --retry and, for the commands
// that have it, --job, plus extra options.
func newClient(c *cli.Context, extra ...client.Option) (*client.Client, error) {
	var addrs []string
	for _, a := range strings.Split(c.String("addr"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("--addr is empty")
	}
	return newClientAt(c, addrs, extra...)
}

// newClientAt is newClient for the nodes at addrs rather than --addr.
func newClientAt(c *cli.Context, addrs []string, extra ...client.Option) (*client.Client, error) {
	opts := []client.Option{client.WithAddrs(addrs...)}
	if tok := c.String("token"); tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	if ca := c.String("tls-ca"); ca != "" {
		conf, err := certs.ClientTLS(ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		opts = append(opts, client.WithTLS(conf))
	}
	if job := c.String("job"); job != "" {
		opts = append(opts, client.WithJob(job))
	}
	if c.IsSet("retry") || c.Duration("retry") > 0 {
		opts = append(opts, client.WithRetry(c.Duration("retry")))
	}
	return client.NewClient(append(opts, extra...)...)
}

// withClient runs fn with a client that is closed afterwards.
func withClient(c *cli.Context, fn func(*client.Client) error) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(cl)
}
