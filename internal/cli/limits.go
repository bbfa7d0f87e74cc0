package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

// limitFlags are the flags of the replicated limits, named alike by serve,
// whose values are a new cluster's initial limits, and by limits set, which
// changes a running cluster's: 0 is a limit's default. Only serve reads
// them from the environment, so that a shell with serve's variables does
// not change a cluster's limits by mistake.
func limitFlags(serve bool) []cli.Flag {
	suffix, envOf := "", func(string) []string { return nil }
	if serve {
		suffix, envOf = "; a new cluster's initial limit only (see raftmaster limits)", env
	}
	flags := []cli.Flag{
		&cli.IntFlag{Name: "max-jobs", Usage: "jobs the cluster holds at once (0: the default, " + fmt.Sprint(fsm.DefaultMaxJobs) + ")" + suffix, EnvVars: envOf("max-jobs")},
		&cli.IntFlag{Name: "max-job-tasks", Usage: "tasks of one job's dataset (0: the ceiling, " + fmt.Sprint(fsm.DefaultMaxJobTasks) + ")" + suffix, EnvVars: envOf("max-job-tasks")},
		&cli.IntFlag{Name: "max-job-chunks", Usage: "chunks of one job's dataset (0: the ceiling, " + fmt.Sprint(fsm.DefaultMaxJobChunks) + ")" + suffix, EnvVars: envOf("max-job-chunks")},
		&cli.IntFlag{Name: "max-job-groups", Usage: "allgather groups of one job (0: the ceiling, " + fmt.Sprint(fsm.DefaultMaxJobGroups) + ")" + suffix, EnvVars: envOf("max-job-groups")},
		&cli.Int64Flag{Name: "max-job-group-bytes", Usage: "allgather data of one job's groups together, in bytes (0: the default, 256 MiB)" + suffix, EnvVars: envOf("max-job-group-bytes")},
		&cli.Int64Flag{Name: "max-state-bytes", Usage: "estimated size of the whole state, every job together, in bytes (0: the default, 4 GiB)" + suffix, EnvVars: envOf("max-state-bytes")},
		&cli.IntFlag{Name: "max-job-kv-keys", Usage: "keys of one job's register (0: the default, " + fmt.Sprint(fsm.DefaultMaxJobKVKeys) + ")" + suffix, EnvVars: envOf("max-job-kv-keys")},
		&cli.Int64Flag{Name: "max-kv-value-bytes", Usage: "bytes of one register value (0: the default, 1 MiB)" + suffix, EnvVars: envOf("max-kv-value-bytes")},
		&cli.DurationFlag{Name: "job-ttl", Usage: "delete a job that has no lease, no save-model holder and no group and was not used for this long; every collection is logged (0: never)" + suffix, EnvVars: envOf("job-ttl")},
	}
	if !serve {
		// A limit left out of limits set keeps its value.
		for _, f := range flags {
			switch f := f.(type) {
			case *cli.IntFlag:
				f.DefaultText = "unchanged"
			case *cli.Int64Flag:
				f.DefaultText = "unchanged"
			case *cli.DurationFlag:
				f.DefaultText = "unchanged"
			}
		}
	}
	return flags
}

func limitsCommand() *cli.Command {
	return &cli.Command{
		Name:  "limits",
		Usage: "show and change the cluster's limits",
		Description: "The limits on jobs (--max-jobs, --max-job-tasks, ...) are part of the replicated state, the\n" +
			"same on every node. serve's limit flags set a new cluster's: its first leader proposes them;\n" +
			"later leaders do not, so a fail-over never changes the limits. A node whose flags differ from\n" +
			"the cluster's logs each that differs. Change a running cluster's limits with limits set.",
		Subcommands: []*cli.Command{
			{
				Name:      "get",
				Usage:     "print the limits in effect",
				UsageText: "raftmaster limits get --addr 127.0.0.1:8001 [--json]",
				Flags:     clientFlags(outputFlags()...),
				Action: func(c *cli.Context) error {
					return withClient(c, func(cl *client.Client) error {
						l, err := cl.Limits()
						if err != nil {
							return err
						}
						return printLimits(c, l)
					})
				},
			},
			{
				Name:  "set",
				Usage: "change the limits the flags name; the others keep their values",
				UsageText: "raftmaster limits set --addr 127.0.0.1:8001 [--max-jobs N] [--max-job-tasks N] [--max-job-chunks N]\n" +
					"    [--max-job-groups N] [--max-job-group-bytes N] [--max-state-bytes N] [--max-job-kv-keys N]\n" +
					"    [--max-kv-value-bytes N] [--job-ttl D] [--json]",
				Description: "Only the limits given change; 0 sets one to its default (--job-ttl 0: no collection).\n" +
					"A value out of range is refused and nothing changes. Lowering a limit below what exists\n" +
					"removes nothing: it refuses growth from then on. Prints the limits in effect afterwards.",
				Flags: clientFlags(append(outputFlags(), limitFlags(false)...)...),
				Action: func(c *cli.Context) error {
					if c.NArg() != 0 {
						return fmt.Errorf("limits set takes flags only, not %q", c.Args().First())
					}
					change, err := limitsChange(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						l, err := cl.SetLimits(change)
						if err != nil {
							return err
						}
						return printLimits(c, l)
					})
				},
			},
		},
	}
}

// limitsChange is the change that the limit flags given to limits set
// ask for.
func limitsChange(c *cli.Context) (rpc.LimitsRequest, error) {
	var r rpc.LimitsRequest
	intFlag := func(name string) *int {
		if !c.IsSet(name) {
			return nil
		}
		v := c.Int(name)
		return &v
	}
	int64Flag := func(name string) *int64 {
		if !c.IsSet(name) {
			return nil
		}
		v := c.Int64(name)
		return &v
	}
	r.MaxJobs, r.MaxJobTasks, r.MaxJobChunks = intFlag("max-jobs"), intFlag("max-job-tasks"), intFlag("max-job-chunks")
	r.MaxJobGroups, r.MaxJobKVKeys = intFlag("max-job-groups"), intFlag("max-job-kv-keys")
	r.MaxJobGroupBytes, r.MaxStateBytes, r.MaxKVValueBytes = int64Flag("max-job-group-bytes"), int64Flag("max-state-bytes"), int64Flag("max-kv-value-bytes")
	if c.IsSet("job-ttl") {
		ttl := rpc.Duration(c.Duration("job-ttl"))
		r.JobTTL = &ttl
	}
	if r == (rpc.LimitsRequest{}) {
		return r, fmt.Errorf("give at least one limit to change, such as --max-jobs N (see raftmaster limits set --help)")
	}
	return r, nil
}

// printLimits prints the limits, under the names of their flags.
func printLimits(c *cli.Context, l rpc.Limits) error {
	asJSON, err := wantJSON(c)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(c.App.Writer, l)
	}
	writeLimits(c.App.Writer, l)
	return nil
}

// writeLimits writes a line per limit, named as its flag.
func writeLimits(w io.Writer, l rpc.Limits) {
	ttl := "off"
	if l.JobTTL > 0 {
		ttl = time.Duration(l.JobTTL).String()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range [][2]string{
		{"max-jobs", fmt.Sprint(l.MaxJobs)},
		{"max-job-tasks", fmt.Sprint(l.MaxJobTasks)},
		{"max-job-chunks", fmt.Sprint(l.MaxJobChunks)},
		{"max-job-groups", fmt.Sprint(l.MaxJobGroups)},
		{"max-job-group-bytes", fmt.Sprintf("%d (%s)", l.MaxJobGroupBytes, humanBytes(l.MaxJobGroupBytes))},
		{"max-state-bytes", fmt.Sprintf("%d (%s)", l.MaxStateBytes, humanBytes(l.MaxStateBytes))},
		{"max-job-kv-keys", fmt.Sprint(l.MaxJobKVKeys)},
		{"max-kv-value-bytes", fmt.Sprintf("%d (%s)", l.MaxKVValueBytes, humanBytes(l.MaxKVValueBytes))},
		{"job-ttl", ttl},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	tw.Flush()
}
