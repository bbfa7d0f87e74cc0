package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

func datasetCommand() *cli.Command {
	return &cli.Command{
		Name:  "dataset",
		Usage: "set the dataset that trainers read",
		Subcommands: []*cli.Command{{
			Name:  "set",
			Usage: "set the dataset to the RecordIO files that GLOBs match (only the first dataset counts)",
			UsageText: "raftmaster dataset set --addr 127.0.0.1:8001 [--chunks-per-task N] [--task-timeout D] [--failure-max N] [--seed N] [--shuffle=false] GLOB...\n" +
				"raftmaster dataset set --client-index 'data/train-*.recordio'",
			Description: "By default the leader expands the globs and indexes the files, so they must be\n" +
				"readable at the same paths on the masters. With --client-index this command\n" +
				"indexes them here and sends the chunk list instead.\n\n" +
				"Each pass dispatches its tasks in a permutation of (seed, pass), the same\n" +
				"whatever the number of trainers and whatever faults happen; --shuffle=false\n" +
				"keeps id order. Without --seed the leader draws one, which the dataset records\n" +
				"(job inspect shows it).",
			Flags: clientFlags(jobFlag(),
				&cli.IntFlag{Name: "chunks-per-task", Usage: "chunks per task (default: the server's)"},
				&cli.DurationFlag{Name: "task-timeout", Usage: "lease of a dispatched task (default: the server's)"},
				&cli.IntFlag{Name: "failure-max", Usage: "failures a task survives (default: the server's)", Value: -1},
				&cli.BoolFlag{Name: "strict", Usage: "refuse a late TaskFinished from an earlier lease"},
				&cli.Uint64Flag{Name: "seed", Usage: "seed of the passes' permutations (default: drawn by the leader)"},
				&cli.BoolFlag{Name: "shuffle", Usage: "dispatch each pass in a permutation of (seed, pass); --shuffle=false keeps id order", Value: true},
				&cli.BoolFlag{Name: "client-index", Usage: "index the files here and send the chunk list"},
			),
			Action: func(c *cli.Context) error {
				if c.NArg() == 0 {
					return fmt.Errorf("give at least one GLOB")
				}
				p := client.DatasetParams{ChunksPerTask: c.Int("chunks-per-task"), TaskTimeout: c.Duration("task-timeout"), Strict: c.Bool("strict")}
				if fm := c.Int("failure-max"); fm >= 0 {
					p.FailureMax = &fm
				}
				if c.IsSet("seed") {
					p.Seed = new(c.Uint64("seed"))
				}
				if c.IsSet("shuffle") {
					p.Shuffle = new(c.Bool("shuffle"))
				}
				cl, err := newClient(c, client.WithClientIndexing(c.Bool("client-index")))
				if err != nil {
					return err
				}
				defer cl.Close()
				start := time.Now()
				resp, err := cl.SetDatasetWithParams(c.Args().Slice(), p)
				if err != nil {
					return err
				}
				order := orderText(rpc.DatasetParams{Shuffle: resp.Shuffle, Seed: resp.Seed})
				if resp.Ignored {
					fmt.Fprintln(c.App.Writer, "ignored: the job has a dataset already, and its first one stays (as in the original master)")
					if len(resp.CurrentPatterns) > 0 {
						fmt.Fprintf(c.App.Writer, "the job reads the files of: %s\n", strings.Join(resp.CurrentPatterns, " "))
					} else {
						fmt.Fprintln(c.App.Writer, "its patterns are unknown (set before the cluster's protocol level 4); job inspect shows its files")
					}
					fmt.Fprintf(c.App.Writer, "its order: %s\n", order)
					return nil
				}
				fmt.Fprintf(c.App.Writer, "dataset set: %d files, %d chunks, %d tasks (%v)\n", resp.Files, resp.Chunks, resp.Tasks, time.Since(start).Round(time.Millisecond))
				fmt.Fprintf(c.App.Writer, "order: %s\n", order)
				return nil
			},
		}},
	}
}
