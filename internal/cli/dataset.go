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
			Usage: "set the dataset to the RecordIO files that GLOBs match, or to a weighted mixture of --source flags (only the first dataset counts)",
			UsageText: "raftmaster dataset set --addr 127.0.0.1:8001 [--chunks-per-task N] [--task-timeout D] [--failure-max N] [--seed N] [--shuffle=false] GLOB...\n" +
				"raftmaster dataset set --client-index 'data/train-*.recordio'\n" +
				"raftmaster dataset set --addr 127.0.0.1:8001 --source NAME=WEIGHT:PATTERN [--source ...] [--chunks-per-task N] ...",
			Description: "By default the leader expands the globs and indexes the files, so they must be\n" +
				"readable at the same paths on the masters. With --client-index this command\n" +
				"indexes them here and sends the chunk list instead.\n\n" +
				"Each pass dispatches its tasks in a permutation of (seed, pass), the same\n" +
				"whatever the number of trainers and whatever faults happen; --shuffle=false\n" +
				"keeps id order. Without --seed the leader draws one, which the dataset records\n" +
				"(job inspect shows it).\n\n" +
				"--source NAME=WEIGHT:PATTERN, repeated, makes the dataset a weighted mixture\n" +
				"instead of GLOBs: each source is the files its patterns match, and the records\n" +
				"handed out follow the weights, which are relative (web=0.7 and code=0.3 give 7\n" +
				"records of web for every 3 of code, whatever the size of each). A source of\n" +
				"several patterns repeats its NAME, with the same WEIGHT, once per pattern; a\n" +
				"pattern may hold ':' and ',' (s3://bucket/web/*.recordio). Every source is read\n" +
				"through at its own pace, and the job's pass is the least of the sources' passes.\n" +
				"The leader indexes the sources (not --client-index). job weights set changes the\n" +
				"weights later, now or at a count of records consumed; job inspect shows them.\n\n" +
				"   raftmaster dataset set --addr n1:8001 --job train \\\n" +
				"     --source web=0.7:'/data/web/*.recordio' --source web=0.7:'/data/forums/*.recordio' \\\n" +
				"     --source code=0.3:'s3://corpus/code/*.recordio'",
			Flags: clientFlags(jobFlag(),
				&cli.IntFlag{Name: "chunks-per-task", Usage: "chunks per task (default: the server's)"},
				&cli.DurationFlag{Name: "task-timeout", Usage: "lease of a dispatched task (default: the server's)"},
				&cli.IntFlag{Name: "failure-max", Usage: "failures a task survives (default: the server's)", Value: -1},
				&cli.BoolFlag{Name: "strict", Usage: "refuse a late TaskFinished from an earlier lease"},
				&cli.Uint64Flag{Name: "seed", Usage: "seed of the passes' permutations (default: drawn by the leader)"},
				&cli.BoolFlag{Name: "shuffle", Usage: "dispatch each pass in a permutation of (seed, pass); --shuffle=false keeps id order", Value: true},
				&cli.BoolFlag{Name: "client-index", Usage: "index the files here and send the chunk list"},
				&cli.GenericFlag{Name: "source", Value: &sourceFlag{},
					Usage: "a source of a weighted mixture, `NAME=WEIGHT:PATTERN` such as web=0.7:/data/web/*.recordio, in place of GLOBs; repeat it for each source, and a source's NAME=WEIGHT with each further pattern"},
			),
			Action: func(c *cli.Context) error {
				p := client.DatasetParams{ChunksPerTask: c.Int("chunks-per-task"), TaskTimeout: c.Duration("task-timeout"), Strict: c.Bool("strict")}
				if specs := sourceSpecs(c); len(specs) > 0 {
					if c.NArg() > 0 {
						return fmt.Errorf("--source and GLOB arguments (%s): a mixture's patterns are in its --source flags", strings.Join(c.Args().Slice(), " "))
					}
					if c.Bool("client-index") {
						return fmt.Errorf("--source and --client-index: the leader indexes a mixture's sources")
					}
					sources, err := parseSources(specs)
					if err != nil {
						return err
					}
					p.Sources = sources
				} else if c.NArg() == 0 {
					return fmt.Errorf("give at least one GLOB, or --source NAME=WEIGHT:PATTERN for each source of a mixture")
				}
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
				if len(p.Sources) > 0 {
					fmt.Fprintf(c.App.Writer, "mixture of %d sources: %s\n", len(p.Sources), sourcesText(p.Sources))
				}
				fmt.Fprintf(c.App.Writer, "order: %s\n", order)
				return nil
			},
		}},
	}
}

// sourcesText writes sources as NAME=WEIGHT pairs, in order.
func sourcesText(sources []client.Source) string {
	parts := make([]string, len(sources))
	for i, s := range sources {
		parts[i] = s.Name + "=" + formatWeight(s.Weight)
	}
	return strings.Join(parts, " ")
}
