package cli

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/urfave/cli/v2"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure task dispatch on throwaway local clusters, Raft beside the etcd backend",
		UsageText: "raftmaster bench [--clients 8] [--tasks 2000] [--passes 1]\n" +
			"raftmaster bench --etcd-endpoints http://127.0.0.1:2379   # also bench the etcd backend",
		Description: "Starts its own servers on 127.0.0.1 in a temporary directory (a bench never\n" +
			"touches a running cluster's dataset): a --nodes Raft cluster and, with\n" +
			"--etcd-endpoints, one etcd-backend master under a fresh key prefix that is deleted\n" +
			"afterwards. It writes a RecordIO dataset of --tasks one-record chunks, then\n" +
			"--clients trainers run --passes passes of GetTask and TaskFinished as fast as they\n" +
			"can. It prints throughput and latency per backend, and each backend's throughput\n" +
			"as a ratio of the first one's, measured in the same run. raftmaster-bench\n" +
			"(make bench-short) compares the same dispatch with etcd and raw Raft, side by side.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "replicas of the Raft cluster"},
			&cli.IntFlag{Name: "clients", Value: 8, Usage: "concurrent trainers"},
			&cli.IntFlag{Name: "tasks", Value: 2000, Usage: "tasks per pass"},
			&cli.IntFlag{Name: "passes", Value: 1, Usage: "passes to run"},
			&cli.StringFlag{Name: "etcd-endpoints", Usage: "an etcd to bench the etcd backend against, comma separated"},
			&cli.BoolFlag{Name: "json", Usage: "print the results as JSON"},
		},
		Action: runBench,
	}
}

// runBench runs harness.Compare with the servers started from this very
// binary.
func runBench(c *cli.Context) error {
	o := harness.Options{Nodes: c.Int("nodes"), Clients: c.Int("clients"), Tasks: c.Int("tasks"), Passes: c.Int("passes"),
		EtcdEndpoints: splitList(c.String("etcd-endpoints")), Progress: c.App.ErrWriter}
	if err := o.Check(); err != nil {
		return err
	}
	var err error
	if o.Bin, err = os.Executable(); err != nil {
		return err
	}
	if o.Dir, err = os.MkdirTemp("", "raftmaster-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(o.Dir)
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	results, err := harness.Compare(ctx, o)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return harness.WriteJSON(c.App.Writer, results)
	}
	return harness.WriteTable(c.App.Writer, results)
}
